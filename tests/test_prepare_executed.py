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


def test_settings_helpers_and_definitions_are_plumbing():
    assert prepare.is_plumbing("from x import settings\nsetup()\ncfg = settings(profile, n=n)")
    assert prepare.is_plumbing("show_settings(cfg, ['n', 'm'])")
    assert prepare.is_plumbing("def original(frame):\n    return frame.mean()")
    assert not prepare.is_plumbing("cfg = settings(profile)\nstudy = run(cfg)")
    assert not prepare.is_plumbing("x = 1")


def test_stderr_left_out_and_local_paths_scrubbed():
    root = str(prepare.REPO)
    warning = nbformat.v4.new_output(
        "stream", name="stderr", text=f"{root}/dpsynth/x.py:3: RuntimeWarning: divide\n"
    )
    printed = nbformat.v4.new_output(
        "stream", name="stdout", text=f"wrote {root}/notebooks/out.csv and {root}/data/a.csv\n"
    )
    shown = nbformat.v4.new_output(
        "display_data", data={"text/plain": f"{root}/results", "image/png": "AAAA"}
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("run()", outputs=[warning, printed, shown])]
    dropped: list[str] = []
    out = prepare.prepare(nb, "ci", dropped)
    outputs = out.cells[0].outputs
    assert [o.get("name") for o in outputs] == ["stdout", None]
    assert outputs[0]["text"] == "wrote out.csv and data/a.csv\n"
    assert outputs[1]["data"]["text/plain"] == "results"
    assert outputs[1]["data"]["image/png"] == "AAAA"
    assert len(dropped) == 1 and "RuntimeWarning" in dropped[0] and root not in dropped[0]


def test_echo_of_a_closing_convergence_check_is_dropped():
    printed = nbformat.v4.new_output("stream", name="stdout", text="4 fits: max R-hat 1.004\n")
    echo = nbformat.v4.new_output("execute_result", data={"text/plain": "1.004"})
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("fit = run()\nassert_converged(fit.rhat, 1.05)", outputs=[printed, echo]),
        _cell("table.round(2)", outputs=[echo]),
    ]
    out = prepare.prepare(nb, "ci")
    assert [o["output_type"] for o in out.cells[0].outputs] == ["stream"]
    assert [o["output_type"] for o in out.cells[1].outputs] == ["execute_result"]
