"""The book build's one-line failure message (tools/explain_failure.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("explain_failure", ROOT / "tools/explain_failure.py")
explain_failure = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(explain_failure)


def test_names_notebook_cell_error_and_next_step(tmp_path):
    nb = nbformat.v4.new_notebook()
    ok = nbformat.v4.new_code_cell("x = 1")
    bad = nbformat.v4.new_code_cell("\nout = run_study(s)\nprint(out)")
    bad.outputs = [
        nbformat.v4.new_output(
            "error", ename="ValueError", evalue="n must be positive\nmore", traceback=["..."]
        )
    ]
    nb.cells = [ok, bad]
    part = tmp_path / "02_x.part.ipynb"
    nbformat.write(nb, part)
    line = explain_failure.explain(part, "02_x", "ci")
    assert "\n" not in line and line.startswith("[make] FAILED: notebook 02_x, cell 2")
    assert "`out = run_study(s)`" in line and "ValueError: n must be positive;" in line
    assert "make book PROFILE=ci" in line and str(part) in line


def test_without_a_cell_error_or_a_notebook(tmp_path):
    part = tmp_path / "03_y.part.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), part)
    assert "without a cell error" in explain_failure.explain(part, "03_y", "paper")
    missing = explain_failure.explain(tmp_path / "none.ipynb", "04_z", "ci")
    assert "did not run" in missing and "\n" not in missing
