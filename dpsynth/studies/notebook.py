"""Helpers the notebooks share: setup, figures, glue and the convergence check.

Every notebook starts with ``setup()`` and imports the rest from here, so that no helper
is defined in two notebooks (``tests/test_notebooks.py`` checks it). IPython, myst-nb and
the Stan-backed studies are imported lazily: the module imports without a kernel.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from dpsynth.studies import plots


def setup(figure_format: str = "png") -> None:
    """Silence tqdm's "IProgress not found" warning; inline figures as ``figure_format``.

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
        return
    shell.run_line_magic("matplotlib", "inline")
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats(figure_format)


def show(fig: Any) -> None:
    """Display a figure inline, then close it (so it is not shown twice)."""
    from IPython.display import display

    display(fig)
    plt.close(fig)


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


def assert_converged(rhat_values: Any, threshold: float = 1.05, what: str = "fits") -> float:
    """Raise AssertionError unless every R-hat is below ``threshold`` (NaN fails).

    Prints the number of values and the largest; returns the largest.
    """
    values = np.atleast_1d(np.asarray(rhat_values, dtype=float)).ravel()
    worst = float(np.max(values)) if values.size else math.nan
    if not worst < threshold:
        raise AssertionError(f"max R-hat {worst:.3f} over {values.size} {what} >= {threshold}")
    print(f"{values.size} {what}: max R-hat {worst:.3f} < {threshold}")
    return worst


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


def print_comparison(table: Any) -> None:
    """Print a comparison (:func:`dpsynth.studies.verdicts.compare`) as plain text.

    The numbers as one table (``to_string``, readable outside the book too), then one
    numbered line per row with its verdict.
    """
    frame = table.drop(columns=["verdict"]).copy()
    frame.index = range(1, len(frame) + 1)
    print(frame.to_string())
    print()
    for i, (quantity, text) in enumerate(zip(table["quantity"], table["verdict"], strict=True), 1):
        print(f"[{i}] {quantity}: {text}")


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
) -> Any:
    """The closing "paper / paper scale / this run" comparison every study notebook ends with.

    ``values``: this run's numbers (:func:`dpsynth.studies.verdicts.summary_frame`); ``specs``:
    the paper's values and tolerances (:func:`dpsynth.studies.verdicts.compare`). Under the
    ``paper`` profile the summary and ``tables`` are written to ``results/<stem>/``; otherwise
    the committed ones are read back and shown beside this run (or one line says there are
    none yet). Prints the table and the verdicts; returns the comparison frame.
    """
    from dpsynth.studies import results, verdicts

    summary = verdicts.summary_frame(values)
    committed = results.paper_scale(stem, {"summary": summary, **(tables or {})}, cfg, profiles)
    print(committed.note)
    print()
    shown = committed.get("summary") if committed.available and not committed.written else None
    table = verdicts.compare(
        list(specs),
        summary,
        study=study,
        committed=shown,
        run_label=run_label,
        committed_label=committed.label,
        run_is_paper_scale=committed.written,
    )
    print_comparison(table)
    return table
