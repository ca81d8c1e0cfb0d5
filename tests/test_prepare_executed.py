"""tools/prepare_executed.py: plumbing hidden, check markers out of the page, a footer."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("prepare", ROOT / "tools" / "prepare_executed.py")
prepare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prepare)


def _cell(source: str, tags=(), outputs=()):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = list(tags)
    cell.outputs = list(outputs)
    return cell


def test_prepare_hides_plumbing_moves_markers_and_adds_a_footer():
    printed = nbformat.v4.new_output("stream", name="stdout", text="table\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell('profile = "ci"', ["parameters"]),
        _cell('profile = "paper"', ["injected-parameters"]),
        _cell("from dpsynth.studies.notebook import setup\nimport numpy as np\nsetup()"),
        _cell("# NBVAL_CHECK_OUTPUT\nprint(table)", outputs=[printed]),
        _cell("x = 2 * y\nglue_numbers({'x': x})"),
        _cell("show(figure())\nglue_numbers({'x': 1})", outputs=[printed]),
        _cell("result = compute()"),
    ]
    out = prepare.prepare(nb, "paper")
    tags = [c.metadata.get("tags", []) for c in out.cells[:7]]
    assert "remove-cell" in tags[0] and "remove-cell" in tags[1]
    assert "remove-input" in tags[2]
    assert "nbval-check-output" in tags[3] and "NBVAL" not in out.cells[3].source
    assert "remove-input" in tags[4]  # glue with nothing to read
    assert "remove-input" not in tags[5] and "remove-input" not in tags[6]
    footer = out.cells[-1]
    assert footer.cell_type == "markdown" and "`paper` profile" in footer.source
    assert "dpsynth" in footer.source and "Python" in footer.source
