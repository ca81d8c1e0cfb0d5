"""Helpers the notebooks share: setup, figures, glue and the convergence check.

Every notebook starts with ``setup()`` and imports the rest from here, so that no helper
is defined in two notebooks (``tests/test_notebooks.py`` checks it). IPython, myst-nb and
the Stan-backed studies are imported lazily: the module imports without a kernel.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from dpsynth.studies import plots
from dpsynth.studies.profiles import STUDY_RHAT_MAX


def setup(figure_format: str = "png") -> None:
    """Silence tqdm's "IProgress not found" warning; inline figures as ``figure_format`` in
    the book's one plot style (:func:`dpsynth.studies.plots.use_style`); DataFrames shown as
    HTML with missing values as a dash (:func:`frame_html`), not NaN.

    The warning comes from ``tqdm.auto``, imported by cmdstanpy, in kernels without
    ipywidgets. PyStan's event loop inside Jupyter is handled by ``dpsynth.engine``.
    """
    warnings.filterwarnings("ignore", message="IProgress not found")
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the notebook tools
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        plots.use_style()
        return
    shell.run_line_magic("matplotlib", "inline")
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats(figure_format)
    plots.use_style()
    import pandas as pd

    shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)


NA_REP = "\u2013"
"""What a missing value shows as in the book's tables (an en dash, never NaN)."""


def frame_html(frame: Any) -> str:
    """A DataFrame as the HTML table a notebook shows (``setup()`` makes it the notebooks'
    HTML view of every frame): pandas' own table, missing values as :data:`NA_REP`."""
    import pandas as pd

    return frame.to_html(
        na_rep=NA_REP,
        max_rows=pd.get_option("display.max_rows"),
        max_cols=pd.get_option("display.max_columns"),
        show_dimensions=False,
        border=0,
        notebook=True,
    )


def show(fig: Any) -> None:
    """Display a figure inline, then close it (so it is not shown twice).

    If two tick labels of an axis overlap (:func:`dpsynth.studies.plots.tick_label_overlaps`,
    computed with the figure's renderer), the x tick labels are slanted
    (:func:`dpsynth.studies.plots.slant_x_tick_labels`) and checked again; if they still
    overlap, a visible note says so under the figure: the book
    check (``tools/check_book.py``) fails on it, and a reader sees why a label is unreadable.
    """
    from IPython.display import display

    overlaps = plots.tick_label_overlaps(fig)
    if overlaps:  # crowded category names: slant them, then measure again
        plots.slant_x_tick_labels(fig)
        overlaps = plots.tick_label_overlaps(fig)
    display(fig)
    plt.close(fig)
    if overlaps:
        note = "Tick labels overlap in the figure above: " + "; ".join(overlaps[:3])
        _display(f'<p class="dpsynth-check admonition warning">{_escape(note)}</p>', note)


def show_table(
    frame: Any,
    caption: str = "",
    na_rep: str = NA_REP,
    float_format: str | None = None,
    index: bool = True,
) -> None:
    """Display a ``pandas.DataFrame`` as an HTML table (plain text outside a notebook).

    A frame left as a cell's last expression is shown by Jupyter as HTML, but ``print(frame)``
    or a frame inside another object is plain text that wraps in the book's column (a
    column then falls on its own line). Missing values show as ``na_rep`` (an en dash), not
    NaN; ``float_format`` (e.g. ``"{:.3f}"``) formats the floats; ``index=False`` leaves the
    row labels out. A ``pandas.Series`` is shown as a one-column table.
    """
    if not hasattr(frame, "columns"):  # a Series
        frame = frame.to_frame()
    fmt = float_format.format if float_format else None
    html = frame.to_html(
        na_rep=na_rep,
        float_format=fmt,
        border=0,
        classes="dpsynth-table",
        escape=True,
        index=index,
    )
    if caption:
        html = html.replace(">", f"><caption>{_escape(caption)}</caption>", 1)
    text = frame.to_string(na_rep=na_rep, float_format=fmt, index=index)
    _display(html, f"{caption}\n{text}" if caption else text)


class KnobError(ValueError):
    """A notebook parameter (papermill ``-p NAME VALUE``) that the notebook does not have, or
    a value it does not accept. Its message is one line naming the knob."""


IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})
"""Globals IPython defines in every notebook: never knobs."""

KNOB_KINDS: dict[str, Any] = {
    "positive int": lambda v: _is_int(v) and v > 0,
    "non-negative int": lambda v: _is_int(v) and v >= 0,
    "positive number": lambda v: _is_number(v) and v > 0,
    "list of positive ints": lambda v: _is_seq(v) and all(_is_int(x) and x > 0 for x in v),
    "list of positive numbers": lambda v: _is_seq(v) and all(_is_number(x) and x > 0 for x in v),
    "bool": lambda v: isinstance(v, bool),
    "path": lambda v: isinstance(v, str | os.PathLike) and str(v) != "",
}
"""The kinds of value a knob may take in :func:`check_knobs` (each may end in ``" or None"``)."""


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _is_seq(v: Any) -> bool:
    return isinstance(v, list | tuple) and len(v) > 0


def _knob_ok(value: Any, spec: str | tuple) -> bool:
    if isinstance(spec, tuple):
        return any(value == x and type(value) is type(x) for x in spec)
    kind, none_ok = spec, False
    if kind.endswith(" or None"):
        kind, none_ok = kind[: -len(" or None")], True
    if value is None:
        return none_ok
    if kind not in KNOB_KINDS:
        raise ValueError(f"check_knobs: unknown kind {spec!r}; kinds: {', '.join(KNOB_KINDS)}")
    return bool(KNOB_KINDS[kind](value))


def _allowed_text(spec: str | tuple) -> str:
    if isinstance(spec, tuple):
        return "one of " + ", ".join(repr(x) for x in spec)
    return "a " + spec if not spec.startswith(("a ", "an ")) else spec


def _one_line_traceback(
    shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None
) -> list[str]:
    """IPython handler for :class:`KnobError`: the error in one line, not a traceback."""
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def check_knobs(namespace: Mapping[str, Any], allowed: str | Mapping[str, str | tuple]) -> None:
    """Refuse a notebook parameter the notebook does not have, or a value it does not accept.

    Call it in the cell after the parameters cell, as
    ``check_knobs(globals(), "01_beta_censoring")``: a notebook stem names its knobs in
    :data:`dpsynth.studies.knobs.KNOBS`. Or pass the knobs themselves:
    ``allowed`` maps each knob to a tuple of allowed values (``("ci", "paper")``) or a kind
    of :data:`KNOB_KINDS`, optionally ``" or None"`` (``"positive int or None"``). A global
    that is not a knob is refused unless its name starts with ``_``, IPython defined it
    (:data:`IPYTHON_NAMES`), or it is a module, class or function (an import). Raises
    :class:`KnobError` with a one-line message; in a notebook the error shows as that line,
    not as a traceback (papermill still stops, as it should).
    """
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover - IPython ships with the notebook tools
        shell = None
    if shell is not None:
        shell.set_custom_exc((KnobError,), _one_line_traceback)
    if isinstance(allowed, str):
        from dpsynth.studies.knobs import KNOBS

        if allowed not in KNOBS:
            raise ValueError(f"check_knobs: no notebook {allowed!r} in dpsynth.studies.knobs")
        allowed = KNOBS[allowed]
    knobs = ", ".join(allowed)
    for name, value in namespace.items():
        if name.startswith("_") or name in IPYTHON_NAMES or name in allowed:
            continue
        if callable(value) or isinstance(value, type(sys)):
            continue
        raise KnobError(
            f"unknown knob {name!r} (papermill -p {name} ...); this notebook's knobs: {knobs}"
        )
    for name, spec in allowed.items():
        if name not in namespace:
            continue
        value = namespace[name]
        if not _knob_ok(value, spec):
            raise KnobError(
                f"{name} = {value!r} is not allowed: {name} must be {_allowed_text(spec)}"
            )


def show_settings(cfg: Mapping[str, Any], keys: Iterable[str], title: str = "This run") -> None:
    """Display a run's settings as one short table (``key | value``), not as a dict."""
    from html import escape

    rows = "".join(
        f"<tr><th>{escape(str(k))}</th><td>{escape(_setting(cfg[k]))}</td></tr>" for k in keys
    )
    text = "\n".join(f"{k}: {_setting(cfg[k])}" for k in keys)
    _display(
        f'<table class="dpsynth-settings"><caption>{escape(title)}</caption>{rows}</table>',
        f"{title}\n{text}",
    )


def _setting(v: Any) -> str:
    if isinstance(v, list | tuple):
        return ", ".join(_setting(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _display(html: str, text: str) -> None:
    """Display HTML in a notebook (with a plain-text fallback); print the text elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with the notebook tools
        print(text)
        return
    if get_ipython() is None:
        print(text)
        return
    display({"text/html": html, "text/plain": text}, raw=True)


def shell_command(args: Iterable[str], program: str = "dpsynth", width: int = 76) -> str:
    """``program args`` as a reader would type it in a shell: quoted where needed, one flag
    and its values per continuation line once the line would pass ``width`` characters."""
    import shlex

    words = [shlex.quote(str(a)) for a in args]
    groups: list[str] = []
    for w in words:
        if w.startswith("--") or not groups:
            groups.append(w)
        else:
            groups[-1] += " " + w
    lines = [program]
    for g in groups:
        if len(lines[-1]) + 1 + len(g) > width:
            lines[-1] += " \\"
            lines.append("    " + g)
        else:
            lines[-1] += " " + g
    return "\n".join(lines)


def run_cli(*args: str, cwd: Any = None) -> Any:
    """Show ``dpsynth ARGS`` as the shell command a reader would type, then run it.

    Runs ``python -m dpsynth ARGS`` with this kernel's Python in ``cwd`` (so file names in
    the command are relative) and returns the ``subprocess.CompletedProcess`` (text output).
    A release whose sampler did not converge is made all the same (its outcome must not
    depend on the data); the notebook reads the convergence from the confidential
    diagnostics (:func:`check_convergence`).
    """
    import subprocess
    import sys

    command = shell_command(args)
    _display(f'<pre class="dpsynth-command">$ {_escape(command)}</pre>', f"$ {command}")
    return subprocess.run(
        [sys.executable, "-m", "dpsynth", *args], capture_output=True, text=True, cwd=cwd
    )


def _escape(text: str) -> str:
    from html import escape

    return escape(text)


class _StepLog:
    """File-like: each line written is one step started; reports steps done and time left."""

    def __init__(self, name: str, steps: int, path: str | None, clock: Any = None) -> None:
        import time

        self.name, self.steps, self.path = name, max(1, int(steps)), path
        self.clock = clock or time.monotonic
        self.stdout = sys.stdout  # where the lines go without a progress file
        self.started, self.done, self.buffer = self.clock(), -1, ""

    def write(self, text: str) -> int:
        self.buffer += text
        while "\n" in self.buffer:
            line, self.buffer = self.buffer.split("\n", 1)
            if line.strip():
                self.step(line.strip())
        return len(text)

    def flush(self) -> None:
        pass

    def step(self, what: str) -> None:
        self.done += 1
        self.emit(f"step {self.done + 1}/{self.steps} ({what})")

    def finish(self) -> None:
        self.done = self.steps
        self.emit(f"{self.steps}/{self.steps} steps done")

    def emit(self, text: str) -> None:
        from dpsynth.studies.runner import PROGRESS_LABEL_ENV_VAR, _duration

        elapsed = self.clock() - self.started
        text += f", {_duration(elapsed)} elapsed"
        if 0 < self.done < self.steps:
            text += f", about {_duration(elapsed / self.done * (self.steps - self.done))} left"
        label = os.environ.get(PROGRESS_LABEL_ENV_VAR)
        line = f"[progress] {label + ': ' if label else ''}{self.name}: {text}\n"
        if self.path is None:
            self.stdout.write(line)
            return
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError:
            self.path = None


@contextlib.contextmanager
def terminal_progress(name: str, steps: int) -> Iterator[None]:
    """Report a long study's steps on the terminal of ``make book``.

    Inside the block, each line the study prints (its "starting step ..." messages, e.g.
    ``count_study(cfg, progress=True)``) becomes a line "step k/steps (...), elapsed, about T
    left" in the file named by ``DPSYNTH_PROGRESS_LOG`` (the terminal, under ``make book``),
    and nothing in the notebook; without that variable the lines are printed as usual.
    """
    from dpsynth.studies.runner import PROGRESS_ENV_VAR

    log = _StepLog(name, steps, os.environ.get(PROGRESS_ENV_VAR) or None)
    with contextlib.redirect_stdout(log):
        yield
    log.finish()


def as_float(v: Any) -> float:
    """``v`` as a Python float (numpy 2 scalars print as np.float64(...)); nan if not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _plain(v: Any) -> Any:
    if isinstance(v, str):
        return v
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v)
    return as_float(v)


def glue_numbers(values: Mapping[str, Any], prefix: str = "") -> None:
    """Glue every ``prefix + key`` -> value without display (text stays text, integers int,
    anything else a Python float, nan for non-numbers)."""
    from myst_nb import glue

    for key, value in values.items():
        glue(f"{prefix}{key}", _plain(value), display=False)


def mean_se_text(values: Any, fmt: str = "{:.3f}") -> str:
    """Replicate values as "mean ± Monte Carlo SE (n)"; "not run" when there are none."""
    from dpsynth.studies.reproduction import estimate

    mean, se, n = estimate(values)
    if n == 0:
        return "not run"
    if not math.isfinite(se):
        return fmt.format(mean)  # one value (e.g. the confidential data's own statistic)
    # no-break spaces: a table cell never wraps between the value and its error
    return f"{fmt.format(mean)}\u00a0±\u00a0{fmt.format(se)}"


def mean_se_frame(
    long: Any, keys: Iterable[str], metrics: Iterable[str], fmt: str = "{:.3f}"
) -> Any:
    """One row per group of ``keys``: each metric as "mean ± SE" over the group's rows
    (e.g. the synthetic sets of one mechanism), and the number of rows ``n``."""
    keys, metrics = list(keys), list(metrics)
    groups = long.groupby(keys, sort=False)
    out = groups[metrics].agg(lambda col: mean_se_text(col, fmt))
    out["n"] = groups.size()
    return out.reset_index()


def pick(long: Any, metric: str, fmt: str = "{:.3f}", **where: Any) -> str:
    """:func:`mean_se_text` of ``metric`` over the rows of ``long`` where each column of
    ``where`` equals its value (numbers compared with a tolerance)."""
    mask = np.ones(len(long), dtype=bool)
    for column, value in where.items():
        if column not in long.columns:
            return "not run"
        if isinstance(value, numbers.Number):
            mask &= np.isclose(long[column].to_numpy(dtype=float), float(value))
        else:
            mask &= (long[column] == value).to_numpy()
    return mean_se_text(long.loc[mask, metric], fmt)


def glue_tables(tables: Mapping[str, Any]) -> None:
    """Glue each frame (without display) so that other pages can paste it with the ``glue``
    directive and its ``:doc:`` option."""
    from myst_nb import glue

    for key, frame in tables.items():
        glue(key, frame, display=False)


def check_convergence(
    rhat_values: Any,
    threshold: float = STUDY_RHAT_MAX,
    what: str = "fits",
    *,
    ess_bulk_min: float | None = None,
    min_ess: float = 100.0,
    divergences: int | None = None,
) -> bool:
    """Report the largest R-hat (and, if given, the smallest bulk ESS and the divergences).

    Within its limits a run prints one line. Outside them (R-hat at or above ``threshold``,
    NaN, bulk ESS under ``min_ess``, any divergence) the chapter shows a warning box that
    names the figure and what to do, and goes on: short chains on a loaded or different
    machine can miss a limit that the paper-scale run meets, and one such fit must not
    stop a book build (the tests keep the assertions that matter). Returns True when
    every figure is within its limits.
    """
    values = np.atleast_1d(np.asarray(rhat_values, dtype=float)).ravel()
    worst = float(np.max(values)) if values.size else math.nan
    problems = []
    if not worst < threshold:
        problems.append(f"max R-hat {worst:.3f} over {values.size} {what} is not below {threshold}")
    if ess_bulk_min is not None and not ess_bulk_min >= min_ess:
        problems.append(f"smallest bulk ESS {ess_bulk_min:.0f} is below {min_ess:.0f}")
    if divergences:
        problems.append(f"{divergences} divergent transitions")
    if not problems:
        print(f"{values.size} {what}: max R-hat {worst:.3f} < {threshold}")
        return True
    _warning_box(
        "; ".join(problems)
        + ". The chains of this run have not mixed well enough for these figures to carry "
        "only the Monte Carlo error stated: read them with care, or rerun the notebook with "
        "longer chains (profile paper) or another seed."
    )
    return False


def _warning_box(text: str) -> None:
    """A warning admonition in the book (the theme's own style); "WARNING: ..." elsewhere."""
    from html import escape

    _display(
        '<div class="admonition warning"><p class="admonition-title">Warning</p>'
        f"<p>{escape(text)}</p></div>",
        f"WARNING: {text}",
    )


def weights_panel(result: Any) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, record_bounds) of a mechanism result, for ``plots.lipschitz_vs_weights``."""
    return result.fit.alpha, result.fit.record_bounds


def weights_panels(study: Any, names: Iterable[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{name: weights_panel(study.results[name])}`` for the synthesizers ``names``."""
    return {name: weights_panel(study.results[name]) for name in names}


def utility_violins(
    study: Any,
    *,
    label: str = "",
    unit: str = "",
    mu_title: str = "posterior of the mean $\\mu$",
) -> None:
    """Show one violin per utility statistic (the m synthetic sets of each synthesizer;
    "Data": bootstrap resamples; dashed: the generating value, if known), then the
    posterior densities of the mean mu. ``label`` prefixes the titles, ``unit`` the axes."""
    from dpsynth.studies.vector_weighted import STATISTICS

    prefix = f"{label}: " if label else ""
    suffix = f" ({unit})" if unit else ""
    order = ["Data", *study.order]
    for stat in STATISTICS:
        sub = study.utility[study.utility["statistic"] == stat]
        ref = None if study.reference is None else study.reference[stat]
        show(
            plots.violins(
                sub,
                "value",
                "synthesizer",
                order=order,
                hline=ref,
                ylabel=f"{stat}{suffix}",
                title=f"{prefix}{stat}",
            )
        )
    mu = study.mu
    show(
        plots.densities(
            {name: mu.loc[mu.synthesizer == name, "mu"] for name in study.order},
            xlabel=f"$\\mu${suffix}",
            title=f"{prefix}{mu_title}",
        )
    )


VERDICT_KINDS = ("agrees", "differs", "not counted", "not in the paper", "not run")
"""The kinds of verdict a comparison row can have (the badge's text and CSS class)."""

_VERDICT_COLOURS = {
    "agrees": ("#d7f0dc", "#14532d"),
    "differs": ("#fde3cc", "#7c2d12"),
    "not counted": ("#e0e7ff", "#1e3a8a"),
    "not in the paper": ("#e5e7eb", "#374151"),
    "not run": ("#e5e7eb", "#374151"),
}
_BASES = ("this run at paper scale", "this run, smaller than the paper's", "paper scale")


def verdict_parts(text: str) -> dict[str, str]:
    """Split a verdict sentence (:func:`dpsynth.studies.reproduction.compare`) into its parts.

    Returns ``kind`` (one of :data:`VERDICT_KINDS`), ``basis`` (which numbers were judged,
    e.g. "paper scale"), ``detail`` (the difference and its size in standard errors, short)
    and ``cause`` (the likely cause of a difference, or "").
    """
    text = str(text).strip()
    for kind in ("not in the paper", "not run"):
        if text == kind:
            return {"kind": kind, "basis": "", "detail": "", "cause": ""}
    basis = ""
    for b in _BASES:
        if text.startswith(b + ": "):
            basis, text = b, text[len(b) + 2 :]
            break
    if text.startswith("not counted"):
        reason, _, rest = text[len("not counted") :].partition("): ")
        detail = reason.strip(" (") + "; judged " + rest.partition("; likely cause: ")[0]
        return {"kind": "not counted", "basis": basis, "detail": detail, "cause": ""}
    kind = "differs" if text.startswith("differs") else "agrees"
    if not text.startswith(kind):
        kind = next((k for k in VERDICT_KINDS if k in text), "differs")
    rest = text[len(kind) :] if text.startswith(kind) else text
    detail, _, cause = rest.partition("; likely cause: ")
    detail = detail.strip().lstrip(":").strip()
    if detail.startswith("(") and detail.endswith(")"):
        detail = detail[1:-1]
    detail = (
        detail.replace("standard errors", "SE")
        .replace("within Monte Carlo error", "within MC error")
        .replace("every replicate gave the same value", "no spread over replicates")
        .replace("within the stated tolerance", "within tolerance")
        .replace("standard error unknown", "SE unknown")
    )
    return {"kind": kind, "basis": basis, "detail": detail, "cause": cause.strip()}


def _number_html(text: Any) -> str:
    """A table cell's value; the "± SE" part set in a smaller, grey span."""
    from html import escape

    value, sep, se = str(text).partition(" ± ")
    if not sep:
        cls = ' class="dpsynth-missing"' if value in ("not in the paper", "not run") else ""
        return f"<span{cls}>{escape(value)}</span>"
    return (
        f'<span class="dpsynth-value">{escape(value)}</span> '
        f'<span class="dpsynth-se" title="Monte Carlo standard error">± {escape(se)}</span>'
    )


def _badge(kind: str) -> str:
    bg, fg = _VERDICT_COLOURS.get(kind, _VERDICT_COLOURS["not run"])
    css = "dpsynth-verdict-" + kind.replace(" ", "-")
    return f'<span class="dpsynth-verdict {css}" style="background:{bg};color:{fg}">{kind}</span>'


def comparison_summary(table: Any) -> str:
    """Sentences computed from a comparison's verdicts, for the close of a reproduction
    chapter: how many counted cells agree under the one criterion
    (:mod:`dpsynth.studies.reproduction`), which differ, how many are shown but not counted,
    and how the literal readings fare where a reading was chosen."""
    parts = [verdict_parts(v) for v in table["verdict"]]
    kinds = [p["kind"] for p in parts]
    judged = kinds.count("agrees") + kinds.count("differs")
    differ = [q for q, p in zip(table["quantity"], parts, strict=True) if p["kind"] == "differs"]
    bases = sorted({p["basis"] for p in parts if p["basis"] and p["kind"] != "not counted"})
    on = f" (judged on {' and '.join(bases)})" if bases else ""
    agree = kinds.count("agrees")
    if judged == 0:
        text = "None of these quantities is reported by the paper and counted, so none is judged."
    elif not differ:
        text = f"All {judged} counted quantities the paper reports agree with it{on}."
    else:
        text = (
            f"Of the {judged} counted quantities the paper reports, {agree} "
            f"{'agrees' if agree == 1 else 'agree'} with it and {len(differ)} "
            f"{'differs' if len(differ) == 1 else 'differ'}{on}: {'; '.join(differ)}."
        )
    own, missing = kinds.count("not in the paper"), kinds.count("not run")
    shown = kinds.count("not counted")
    extra = []
    if shown:
        extra.append(
            f"{shown} {'is' if shown == 1 else 'are'} shown but not counted (equal by "
            "construction, tuned to the paper, repeated, or without an error to judge by)"
        )
    if own:
        extra.append(f"{own} {'is' if own == 1 else 'are'} dpsynth's own (not in the paper)")
    if missing:
        extra.append(f"{missing} {'was' if missing == 1 else 'were'} not run")
    if extra:
        text += " " + "; ".join(extra).capitalize() + "."
    literal = [c for c in table.columns if str(c).startswith("literal reading")]
    if literal:
        cells = [
            str(v)
            for v, kind in zip(table[literal[0]], kinds, strict=True)
            if kind in ("agrees", "differs") and str(v).split(" (")[-1].startswith(("a", "d"))
        ]
        ok = sum("(agrees" in c for c in cells)
        if cells:
            text += (
                f" Where dpsynth chose a reading, the literal reading's figure agrees in {ok} of "
                f"the {len(cells)} counted cells that have a standard error to judge it by."
            )
    return text


def comparison_html(table: Any, note: str = "") -> str:
    """A comparison as an HTML table that wraps within the book's column.

    One row per quantity: the paper's number, dpsynth's numbers (each "value ± Monte Carlo
    standard error" where known) and a short verdict coloured by kind (agrees / differs / not
    in the paper / not run) with the difference in standard errors; a difference's likely
    cause folds out under it. ``note`` (e.g. where the committed numbers come from) and the
    computed summary (:func:`comparison_summary`) go above and below.
    """
    from html import escape

    columns = [c for c in table.columns if c not in ("quantity", "verdict")]
    head = '<th class="dpsynth-index"></th>' + "".join(
        f"<th>{escape(str(c))}</th>" for c in ["quantity", *columns, "verdict"]
    )
    rows = []
    for i, (_, row) in enumerate(table.iterrows(), 1):
        parts = verdict_parts(row["verdict"])
        cells = [f'<td class="dpsynth-index">{i}</td>', f"<td>{escape(str(row['quantity']))}</td>"]
        cells += [f'<td class="dpsynth-number">{_number_html(row[c])}</td>' for c in columns]
        verdict = _badge(parts["kind"])
        if parts["detail"]:
            verdict += f' <span class="dpsynth-detail">{escape(parts["detail"])}</span>'
        if parts["basis"]:
            verdict += f'<div class="dpsynth-basis">on {escape(parts["basis"])}</div>'
        if parts["cause"]:
            verdict += (
                '<details class="dpsynth-cause"><summary>likely cause</summary>'
                f"{escape(parts['cause'])}</details>"
            )
        cells.append(f'<td class="dpsynth-verdict-cell">{verdict}</td>')
        rows.append(
            f'<tr class="dpsynth-row-{parts["kind"].replace(" ", "-")}">{"".join(cells)}</tr>'
        )
    note_html = f'<p class="dpsynth-note">{escape(note)}</p>' if note else ""
    summary = f'<p class="dpsynth-summary">{escape(comparison_summary(table))}</p>'
    return (
        f'<div class="dpsynth-comparison-block tex2jax_ignore">{note_html}'
        f'<table class="dpsynth-comparison"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>{summary}</div>"
    )


def comparison_text(table: Any, note: str = "") -> str:
    """The same comparison as plain text (terminals, ``text/plain``): the numbers as one
    table, then one numbered line per row with its verdict, then the summary."""
    frame = table.drop(columns=["verdict"]).copy()
    frame.index = range(1, len(frame) + 1)
    lines = [note, ""] if note else []
    lines.append(frame.to_string())
    lines.append("")
    for i, (quantity, text) in enumerate(zip(table["quantity"], table["verdict"], strict=True), 1):
        lines.append(f"[{i}] {quantity}: {text}")
    lines += ["", comparison_summary(table)]
    return "\n".join(lines)


def print_comparison(table: Any, note: str = "") -> None:
    """Show a comparison (:func:`dpsynth.studies.reproduction.compare`): an HTML table in a
    notebook (:func:`comparison_html`), plain text elsewhere (:func:`comparison_text`)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with the notebook tools
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(
            {
                "text/html": comparison_html(table, note),
                "text/plain": comparison_text(table, note),
            },
            raw=True,
        )
    else:
        print(comparison_text(table, note))


def closing_comparison(
    stem: str,
    values: Mapping[str, Any],
    specs: Iterable[Mapping[str, Any]],
    *,
    study: str,
    cfg: Mapping[str, Any],
    profiles: Mapping[str, Mapping[str, Any]],
    run_label: str,
    tables: Mapping[str, Any] | None = None,
    literal: tuple[str, Any] | None = None,
) -> Any:
    """The closing "paper / paper scale / this run" comparison every study notebook ends with.

    ``values``: this run's numbers (:func:`dpsynth.studies.reproduction.summary_frame`); ``specs``:
    the paper's values and tolerances (:func:`dpsynth.studies.reproduction.compare`). Under the
    ``paper`` profile the summary and ``tables`` are written to ``results/<stem>/``; otherwise
    the committed ones are read back and shown beside this run (or one line says there are
    none yet). ``literal``: (column label, summary frame) of a run under the paper's literal
    reading where dpsynth chose another (its rows named by the specs' ``literal`` key). Shows
    the table, the verdicts and their summary (:func:`print_comparison`); returns the
    comparison frame.
    """
    from dpsynth.studies import reproduction, results

    summary = reproduction.summary_frame(values)
    committed = results.paper_scale(stem, {"summary": summary, **(tables or {})}, cfg, profiles)
    shown = committed.get("summary") if committed.available and not committed.written else None
    table = reproduction.compare(
        list(specs),
        summary,
        study=study,
        committed=shown,
        run_label=run_label,
        committed_label=committed.label,
        run_is_paper_scale=committed.written,
        **({} if literal is None else {"literal_label": literal[0], "literal": literal[1]}),
    )
    print_comparison(table, committed.note)
    return table
