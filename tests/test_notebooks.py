"""The notebooks as source: MyST twins in sync, no helper defined twice, outputs checked.

Every ``notebooks/NN_*.ipynb`` is paired by jupytext with a MyST-markdown twin
``notebooks/NN_*.md`` (``jupytext --sync notebooks/NN_*.ipynb`` after an edit), so that
diffs read as text. Helpers shared by notebooks live in ``dpsynth.studies.notebook``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import jupytext
import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
PAIRING = "ipynb,md:myst"


def _cells(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in nb.cells]


def _code(nb) -> str:
    """The code cells as one Python module (IPython magics commented out, as jupytext does)."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            lines.append("# " + line if line.lstrip().startswith(("%", "!")) else line)
        lines.append("")
    return "\n".join(lines)


def test_notebooks_found() -> None:
    assert len(NOTEBOOKS) >= 8, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_twin_in_sync(path: Path) -> None:
    """The .md twin has the same cells (types and sources) as the .ipynb."""
    twin = path.with_suffix(".md")
    assert twin.exists(), f"{twin.name} is missing: run jupytext --sync {path.name}"
    nb = jupytext.read(path)
    md = jupytext.read(twin)
    assert nb.metadata.get("jupytext", {}).get("formats") == PAIRING, (
        f"{path.name} is not paired as {PAIRING}"
    )
    assert _cells(md) == _cells(nb), (
        f"{twin.name} is out of sync with {path.name}: run jupytext --sync notebooks/{path.name}"
    )


def test_no_function_defined_in_two_notebooks() -> None:
    """A helper used by several notebooks belongs in dpsynth.studies.notebook."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in NOTEBOOKS:
        tree = ast.parse(_code(jupytext.read(path)), filename=path.name)
        names = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        for name in names:
            where[name].append(path.name)
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, f"defined in several notebooks (move to dpsynth.studies.notebook): {twice}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_has_checked_output(path: Path) -> None:
    """Each notebook has at least one cell whose output tests/test_notebook_outputs.py checks."""
    nb = jupytext.read(path)
    checked = [c for c in nb.cells if c.cell_type == "code" and "# NBVAL_CHECK_OUTPUT" in c.source]
    assert checked, f"{path.name} has no # NBVAL_CHECK_OUTPUT cell"
    for cell in checked:
        assert cell.get("outputs"), f"{path.name}: a checked cell has no committed output"


def test_notebook_helpers() -> None:
    """The shared helpers: float conversion and the one form of the R-hat assertion."""
    import math

    import numpy as np

    from dpsynth.studies import notebook

    assert (
        notebook.as_float(np.float64(1.5)) == 1.5 and type(notebook.as_float(np.int64(2))) is float
    )
    assert math.isnan(notebook.as_float(None)) and math.isnan(notebook.as_float("n/a"))
    assert notebook._plain(np.int64(3)) == 3 and type(notebook._plain(np.int64(3))) is int
    assert (
        notebook._plain("Censor_w") == "Censor_w" and type(notebook._plain(np.float32(1))) is float
    )


def test_check_convergence_warns_and_goes_on(capsys):
    """Within the limits: one printed line. Outside them (R-hat, NaN, no value, ESS,
    divergences): a WARNING naming the figure, no exception (the chapter goes on)."""
    from dpsynth.studies import notebook

    assert notebook.check_convergence([1.001, 1.02], 1.05) is True
    assert "max R-hat 1.020 < 1.05" in capsys.readouterr().out
    for bad, says in (
        ([1.001, 1.06], "max R-hat 1.060 over 2 fits is not below 1.05"),
        ([1.0, float("nan")], "max R-hat nan"),
        ([], "over 0 fits"),
    ):
        assert notebook.check_convergence(bad, 1.05) is False
        out = capsys.readouterr().out
        assert out.startswith("WARNING: ") and says in out and "rerun" in out
    assert notebook.check_convergence([1.0], ess_bulk_min=40.0, divergences=0) is False
    assert "smallest bulk ESS 40 is below 100" in capsys.readouterr().out
    assert notebook.check_convergence([1.0], ess_bulk_min=400.0, divergences=3) is False
    assert "3 divergent transitions" in capsys.readouterr().out


def test_code_lines_fit_the_book_column():
    """Code shown in the book fits its column: at most 88 characters a line (the
    parameters cell, which the book does not show, is exempt)."""
    long = []
    for path in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
                continue
            long += [(path.name, line) for line in cell.source.splitlines() if len(line) > 88]
    assert not long, long


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_lists_every_knob_with_its_meaning(path):
    """`papermill --help-notebook` shows each knob of dpsynth.studies.knobs with a help text
    (papermill skips a parameter line holding two '=', e.g. one in its comment)."""
    import papermill

    from dpsynth.studies.knobs import KNOBS

    found = {k: v["help"] for k, v in papermill.inspect_notebook(str(path)).items()}
    assert set(found) == set(KNOBS[path.stem]), path.name
    assert all(found.values()), {k: v for k, v in found.items() if not v}
