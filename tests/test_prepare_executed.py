"""What the executed pages show: tools/prepare_executed.py (plumbing hidden, check markers
out of the page, stderr and local paths out of the outputs, a footer), and the notebook
helpers whose output the pages carry (comparison tables, shell commands, progress lines)."""

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
        _cell("fit = run()\ncheck_convergence(fit.rhat, 1.05)", outputs=[printed, echo]),
        _cell("table.round(2)", outputs=[echo]),
    ]
    out = prepare.prepare(nb, "ci")
    assert [o["output_type"] for o in out.cells[0].outputs] == ["stream"]
    assert [o["output_type"] for o in out.cells[1].outputs] == ["execute_result"]


# ---- what the executed pages show: comparison tables, commands, progress lines ----------


def _comparison():
    from dpsynth.studies import reproduction

    specs = [
        {"key": "a", "label": "LW bound", "paper": 3.5, "rel_tol": 0.15},
        {"key": "b", "label": "best synthesizer", "paper": "CW"},
        {"key": "c", "label": "sd ratio", "paper": None},
        {"key": "d", "label": "count", "paper": 10.0, "cause": "censor_w_count"},
    ]
    run = reproduction.summary_frame({"a": [3.1, 3.4, 3.9], "b": "LW", "c": 1.3, "d": [20, 21, 22]})
    return reproduction.compare(specs, run, study="beta", run_label="this run (ci)")


def test_verdict_parts_are_short_and_typed():
    from dpsynth.studies.notebook import verdict_parts

    parts = [verdict_parts(v) for v in _comparison()["verdict"]]
    assert [p["kind"] for p in parts] == ["agrees", "differs", "not in the paper", "differs"]
    assert parts[0]["basis"] == "this run, smaller than the paper's"
    assert "SE" in parts[0]["detail"] and "standard errors" not in parts[0]["detail"]
    from dpsynth.studies.reproduction import CAUSES

    assert parts[3]["cause"] == CAUSES[("beta", "censor_w_count")]
    assert all(len(p["detail"]) < 60 for p in parts)


def test_comparison_html_is_a_table_with_coloured_verdicts_and_standard_errors():
    from dpsynth.studies.notebook import comparison_html, comparison_summary, comparison_text

    table = _comparison()
    html = comparison_html(table, note="read the committed tables")
    assert html.count("<tr class=") == 4 and "<table" in html and "<pre" not in html
    for kind in ("agrees", "differs", "not-in-the-paper"):
        assert f"dpsynth-verdict-{kind}" in html
    assert 'class="dpsynth-se"' in html and "± " in html  # MC standard error beside the value
    assert "<details" in html and "likely cause" in html
    assert "tex2jax_ignore" in html  # dollar signs in labels are never maths
    summary = comparison_summary(table)
    assert summary.startswith(
        "Of the 3 counted quantities the paper reports, 1 agrees with it and 2"
    )
    assert "1 is dpsynth's own" in summary
    assert summary in comparison_text(table)


def test_shell_command_is_what_a_reader_types():
    from dpsynth.studies.notebook import shell_command

    args = ["synthesize", "my data.csv", "--column", "salary", "--bounds", "0", "509000"]
    args += ["--mechanism", "censor-uw", "--epsilon", "5", "--out", "out.csv"]
    text = shell_command(args, width=50)
    lines = text.splitlines()
    assert lines[0].startswith("dpsynth synthesize 'my data.csv'")
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert all(len(line) <= 52 for line in lines)
    assert "--bounds 0 509000" in text  # a flag stays with its values


def test_progress_lines_for_the_terminal(tmp_path, monkeypatch):
    from dpsynth.studies import runner
    from dpsynth.studies.notebook import terminal_progress

    log = tmp_path / "progress.log"
    monkeypatch.setenv(runner.PROGRESS_ENV_VAR, str(log))
    monkeypatch.setenv(runner.PROGRESS_LABEL_ENV_VAR, "01_beta")
    now = [0.0]
    progress = runner.ProgressLog("beta_replicate", 4, 1, clock=lambda: now[0])
    now[0] = 30.0
    progress.update()  # 2 of 4: 1 computed in 30 s, 2 left
    progress.update()
    now[0] = 65.0
    progress.update()
    lines = log.read_text().splitlines()
    assert (
        lines[0] == "[progress] 01_beta: beta_replicate: 1 of 4 replicates from the cache, 3 to run"
    )
    assert lines[1].endswith("2/4 replicates done, 30 s elapsed, about 1 min 0 s left")
    assert lines[-1].endswith("4/4 replicates done, 1 min 5 s elapsed")
    log.unlink()
    with terminal_progress("one-column study", 2):
        print("[real_data] first")
        print("[real_data] second")
    lines = log.read_text().splitlines()
    assert lines[0].startswith("[progress] 01_beta: one-column study: step 1/2 ([real_data] first)")
    assert lines[-1].startswith("[progress] 01_beta: one-column study: 2/2 steps done")


def test_the_knob_check_cell_is_plumbing():
    src = 'from dpsynth.studies.notebook import check_knobs\n\ncheck_knobs(globals(), "01_beta_censoring")'
    assert prepare.is_plumbing(src)


def test_code_on_a_toggle_except_where_it_is_the_lesson():
    """Figures and tables on the page, their code behind a toggle (hide-input); plumbing
    removed; a chapter whose code is the lesson keeps it shown."""

    def cells():
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            _cell("import numpy as np"),
            _cell("show(plots.densities(out))"),
            nbformat.v4.new_markdown_cell("text"),
        ]
        return nb

    hidden = [c.metadata.get("tags", []) for c in prepare.prepare(cells(), "ci").cells[:3]]
    assert "remove-input" in hidden[0] and "hide-input" not in hidden[0]
    assert "hide-input" in hidden[1] and "remove-input" not in hidden[1]
    assert hidden[2] == []
    shown = prepare.prepare(cells(), "ci", show_code=True).cells[1].metadata.get("tags", [])
    assert "hide-input" not in shown
    assert "08_synthesize_your_own" in prepare.CODE_IS_THE_LESSON
