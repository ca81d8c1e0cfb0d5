"""Notebook helpers a student meets: the knob check, HTML tables, overlapping tick labels."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from dpsynth.studies import notebook, plots  # noqa: E402
from dpsynth.studies.notebook import KnobError, check_knobs  # noqa: E402

KNOBS = {
    "profile": ("ci", "paper"),
    "epsilons": "list of positive numbers or None",
    "R": "positive int or None",
    "n": "positive int or None",
    "seed": "non-negative int or None",
    "data_path": "path or None",
    "use_cache": "bool",
}


def namespace(**extra):
    ns = {
        "profile": "ci",
        "epsilons": None,
        "R": None,
        "n": None,
        "seed": None,
        "data_path": None,
        "use_cache": True,
        # what a kernel and the notebook's imports leave in globals()
        "In": [],
        "Out": {},
        "get_ipython": lambda: None,
        "exit": None,
        "quit": None,
        "_": None,
        "_i1": "profile = 'ci'",
        "np": np,
        "check_knobs": check_knobs,
        "pd": pd,
    }
    ns.update(extra)
    return ns


def test_good_knobs_pass():
    check_knobs(namespace(), KNOBS)
    check_knobs(
        namespace(profile="paper", epsilons=[5, 4.5], R=3, n=100, seed=0, data_path="x.csv"),
        KNOBS,
    )


def test_an_unknown_knob_is_refused_in_one_line_naming_it_and_the_knobs():
    with pytest.raises(KnobError) as exc:
        check_knobs(namespace(nn=300), KNOBS)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "'nn'" in msg and "profile, epsilons, R, n, seed, data_path, use_cache" in msg


@pytest.mark.parametrize(
    ("knob", "value", "allowed"),
    [
        ("profile", "full", "one of 'ci', 'paper'"),
        ("profile", None, "one of 'ci', 'paper'"),
        ("n", -5, "a positive int or None"),
        ("n", 2.5, "a positive int or None"),
        ("R", True, "a positive int or None"),
        ("seed", -1, "a non-negative int or None"),
        ("epsilons", [5, -1], "a list of positive numbers or None"),
        ("epsilons", [], "a list of positive numbers or None"),
        ("epsilons", [math.inf], "a list of positive numbers or None"),
        ("use_cache", "yes", "a bool"),
        ("data_path", "", "a path or None"),
    ],
)
def test_an_invalid_value_is_refused_in_one_line(knob, value, allowed):
    with pytest.raises(KnobError) as exc:
        check_knobs(namespace(**{knob: value}), KNOBS)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{knob} = {value!r} is not allowed") and msg.endswith(allowed)


def test_a_knob_error_is_a_value_error():
    assert issubclass(KnobError, ValueError)


def test_in_ipython_the_error_shows_as_one_line(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        capsys.readouterr()
        res = shell.run_cell(
            "from dpsynth.studies.notebook import check_knobs\n"
            "profile = 'ci'\nnn = 3\n"
            "check_knobs(globals(), {'profile': ('ci', 'paper')})\n"
        )
        out = capsys.readouterr()
        assert isinstance(res.error_in_exec, KnobError)  # papermill still stops
        shown = [ln for ln in (out.out + out.err).splitlines() if ln.strip()]
        assert shown == [
            "KnobError: unknown knob 'nn' (papermill -p nn ...); this notebook's knobs: profile"
        ]
    finally:
        shell.set_custom_exc((), None)
        InteractiveShell.clear_instance()


def test_rerun_says_a_notebook_failure_in_one_line():
    """papermill's execution error, as dpsynth.studies.rerun prints it: a refused knob with
    exit 2 and the knob's own line; any other error with the cell and exit 1."""
    from papermill.exceptions import PapermillExecutionError

    from dpsynth.studies.rerun import failure_line

    knob = PapermillExecutionError(
        2, 3, "check_knobs(globals())", "KnobError", "unknown knob 'nn' (...); knobs: n", []
    )
    line, status = failure_line(knob)
    assert status == 2 and line == "rerun: refused: unknown knob 'nn' (...); knobs: n"
    other = PapermillExecutionError(5, 7, "fit()", "ValueError", "bad\nmore", ["tb"])
    line, status = failure_line(other)
    assert status == 1 and "\n" not in line
    assert line.startswith("rerun: the notebook stopped at cell In [7] with ValueError: bad;")


@pytest.mark.slow
def test_rerun_refuses_a_misspelt_knob_in_one_line(tmp_path, capfd):
    """End to end on notebook 04: papermill's traceback is replaced by one line, exit 2,
    and the notebook stops before its study."""
    from pathlib import Path

    from dpsynth.studies.rerun import main

    root = Path(__file__).resolve().parents[1]
    status = main([
        str(root / "notebooks" / "04_reweighting.ipynb"), str(tmp_path / "out.ipynb"),
        "--cwd", str(root / "notebooks"), "-k", "python3", "--log-level", "ERROR",
        "--no-progress-bar", "-p", "nn", "400",
    ])  # fmt: skip
    err = capfd.readouterr().err
    assert status == 2
    assert err.strip() == (
        "rerun: refused: unknown knob 'nn' (papermill -p nn ...); this notebook's knobs: "
        "profile, n, m, seed"
    )


def test_show_table_outside_a_notebook_prints_the_frame_without_nan(capsys):
    frame = pd.DataFrame({"rule": ["thm7", "rubin"], "p": [0.95, np.nan]})
    notebook.show_table(frame, caption="Table 1", float_format="{:.2f}")
    out = capsys.readouterr().out
    assert out.startswith("Table 1\n") and "0.95" in out and "NaN" not in out


def test_show_table_html_has_no_nan(monkeypatch):
    shown = {}
    monkeypatch.setattr(notebook, "_display", lambda html, text: shown.update(html=html))
    notebook.show_table(pd.DataFrame({"p": [np.nan, 0.5]}), caption="T")
    assert "<table" in shown["html"] and "NaN" not in shown["html"]
    assert "<caption>T</caption>" in shown["html"]


def crowded(n_ticks: int):
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot(np.arange(n_ticks), np.arange(n_ticks))
    ax.set_xticks(np.arange(n_ticks), [f"{x:.4f}" for x in np.linspace(0, 1, n_ticks)])
    return fig


def test_tick_label_overlaps_are_found():
    fig = crowded(12)
    found = plots.tick_label_overlaps(fig)
    plt.close(fig)
    assert found and found[0].startswith("x axis")


def test_readable_ticks_pass():
    fig = crowded(2)
    assert plots.tick_label_overlaps(fig) == []
    plt.close(fig)


def test_show_leaves_a_visible_note_under_a_figure_with_overlapping_ticks(monkeypatch):
    import IPython.display

    notes = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: None)
    monkeypatch.setattr(notebook, "_display", lambda html, text: notes.append(text))
    notebook.show(crowded(12))
    assert len(notes) == 1 and notes[0].startswith("Tick labels overlap")
    notebook.show(crowded(2))
    assert len(notes) == 1


def test_metric_grid_wraps_four_panels_into_two_columns_with_readable_ticks():
    rows = []
    for sc in ("n = 100, [-4, 4]", "n = 100, [-4, 5]", "n = 1000, [-4, 4]", "n = 1000, [-4, 5]"):
        for b in ("bit", "truncation"):
            for w in np.linspace(0.05, 0.95, 10):
                rows.append(
                    {
                        "scenario": sc,
                        "bounding": b,
                        "w": w,
                        "bias": w / 10,
                        "coverage": 0.9,
                        "ci_half_width": 1 - w,
                    }
                )
    frame = pd.DataFrame(rows)
    plots.use_style()
    fig = plots.metric_grid(
        frame,
        "w",
        ["bias", "coverage", "ci_half_width"],
        panel="scenario",
        group="bounding",
        xlabel="share $w$ of $\\epsilon$ on $\\bar x$",
        title="Figure 8",
    )
    shape = fig.axes[0].get_subplotspec().get_gridspec().get_geometry()
    assert shape == (6, 2)
    assert plots.tick_label_overlaps(fig) == []
    plt.close(fig)


def _parameters_cell(md: str) -> list[str]:
    import re

    cell = re.search(r"tags: \[parameters\]\n(.*?)^```", md, re.S | re.M).group(1)
    return re.findall(r"^(\w+)\s*=", cell, re.M)


def test_every_notebook_declares_exactly_its_knobs():
    from pathlib import Path

    from dpsynth.studies.knobs import KNOBS

    stems = sorted(p.stem for p in (Path(__file__).parents[1] / "notebooks").glob("[0-9]*.md"))
    assert stems == sorted(KNOBS)
    for stem in stems:
        md = (Path(__file__).parents[1] / "notebooks" / f"{stem}.md").read_text()
        assert _parameters_cell(md) == list(KNOBS[stem]), stem


def test_each_notebooks_defaults_pass_its_knob_check():
    import ast
    import re
    from pathlib import Path

    from dpsynth.studies.knobs import KNOBS

    for stem in KNOBS:
        md = (Path(__file__).parents[1] / "notebooks" / f"{stem}.md").read_text()
        cell = re.search(r"tags: \[parameters\]\n(.*?)^```", md, re.S | re.M).group(1)
        ns: dict = {}
        exec(compile(ast.parse(cell), stem, "exec"), ns)
        check_knobs({k: v for k, v in ns.items() if k != "__builtins__"}, stem)
        with pytest.raises(KnobError, match="profile"):
            check_knobs({**ns, "profile": "full"}, stem)


def test_a_stem_names_the_knobs_and_an_unknown_stem_is_refused():
    with pytest.raises(KnobError, match="'nn'.*profile, epsilons, R, n, seed, n_jobs"):
        check_knobs({"profile": "ci", "nn": 3}, "01_beta_censoring")
    with pytest.raises(ValueError, match="no notebook"):
        check_knobs({}, "10_nothing")


def test_the_rerun_page_lists_every_notebook_and_its_knobs():
    from pathlib import Path

    from dpsynth.studies.knobs import KNOBS

    page = (Path(__file__).parents[1] / "book" / "rerun.md").read_text()
    for stem, knobs in KNOBS.items():
        row = next((ln for ln in page.splitlines() if ln.startswith(f"| `{stem}` |")), None)
        assert row is not None, f"book/rerun.md has no row for {stem}"
        listed = row.rsplit("|", 2)[-2]
        assert [k.strip("` ") for k in listed.split(",")] == [k for k in knobs if k != "profile"]


def test_show_table_without_index_and_for_a_series(monkeypatch):
    shown = {}
    monkeypatch.setattr(notebook, "_display", lambda html, text: shown.update(html=html, text=text))
    notebook.show_table(pd.DataFrame({"fit": [1, 2], "c": [0.5, 0.25]}), index=False)
    assert "<th>fit</th>" in shown["html"] and "<th>0</th>" not in shown["html"]
    notebook.show_table(pd.Series({"best": "negbin censor-uw/reference", "met": True}))
    assert "negbin censor-uw/reference" in shown["html"] and "<table" in shown["html"]


def test_frames_show_a_dash_for_missing_values_not_nan():
    html = notebook.frame_html(pd.DataFrame({"radius": [np.nan, 18.0], "k": [0.95, None]}))
    assert 'class="dataframe"' in html and "NaN" not in html and notebook.NA_REP in html


def test_setup_makes_frame_html_the_notebooks_view_of_a_frame(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.kernel = object()  # setup() configures only a kernel's shell
        monkeypatch.setattr(shell, "run_line_magic", lambda *a: None)  # no GUI loop here
        notebook.setup()
        fmt = shell.display_formatter.formatters["text/html"]
        assert "NaN" not in fmt(pd.DataFrame({"x": [np.nan]}))
    finally:
        InteractiveShell.clear_instance()


def test_crowded_category_labels_are_turned_upright_until_readable():
    import matplotlib.pyplot as plt

    from dpsynth.studies import plots

    fig, ax = plt.subplots(figsize=(3, 2))
    names = ["Weighted (aDP)", "Weighted-e (aDP)", "Censor_w", "Censor_uw", "Unweighted"]
    ax.bar(names, [1, 2, 3, 4, 5])
    assert plots.tick_label_overlaps(fig)  # as drawn, the names collide
    plots.slant_x_tick_labels(fig)
    assert plots.tick_label_overlaps(fig) == []
    assert all(label.get_rotation() == 90 for label in ax.get_xticklabels())
    plt.close(fig)


def test_run_cli_runs_the_command_once_and_shows_it(monkeypatch, capsys):
    """One run of ``python -m dpsynth ARGS`` whatever it returns (a release is never
    refused for its convergence, so there is nothing to retry), the command shown."""
    import subprocess
    from types import SimpleNamespace

    from dpsynth.studies import notebook

    calls = []

    def fake_run(argv, **kw):
        calls.append(argv[3:])
        return SimpleNamespace(returncode=2, stderr="dpsynth: error: --bounds: ...")

    monkeypatch.setattr(subprocess, "run", fake_run)
    run = notebook.run_cli("synthesize", "a.csv")
    assert run.returncode == 2 and calls == [["synthesize", "a.csv"]]
    assert "$ dpsynth synthesize a.csv" in capsys.readouterr().out
