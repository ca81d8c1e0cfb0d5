"""The figures the notebooks show (matplotlib only; the library never imports this).

The modips figures (notebook 07, Liu Section 5) come last: metrics against m, epsilon or
w, one panel per scenario.

Each function takes a tidy ``pandas.DataFrame`` (one row per replicate x setting)
or arrays, draws on a new figure and returns it, so a notebook cell is one call.

One style for the whole book (:data:`STYLE`, applied by :func:`use_style`, which
``dpsynth.studies.notebook.setup`` calls): every figure is :data:`WIDTH` inches wide at 100
pixels per inch, the width of the book's column at 1280 px; its
smallest text (tick labels, legends) is 11 pt. The book's column is about 690 px wide at
1280 px, so a figure is shown at (nearly) its own size and that text at about 11 pt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

WIDTH = 7.0
"""Width of every figure in inches (700 px at 100 dpi: the book's column at 1280 px)."""

STYLE = {
    "figure.dpi": 100,
    "figure.figsize": (WIDTH, 4.0),
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "legend.title_fontsize": 11,
    "legend.frameon": False,
    "figure.titlesize": 14,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.6,
}
"""matplotlib rcParams of the book's figures (sizes in points)."""


def use_style() -> None:
    """Apply :data:`STYLE` to matplotlib's rcParams (the notebooks' ``setup()`` calls it)."""
    plt.rcParams.update(STYLE)


PALETTE = {
    "Data": "#4d4d4d",
    "Unweighted": "#8c8c8c",
    "Weighted": "#1b9e77",
    "LW": "#1b9e77",
    "LW_final": "#66c2a5",
    "CW": "#d95f02",
    "CW_final": "#fc8d62",
    "SW": "#7570b3",
    "Weighted-e": "#e7298a",
    "Censor_w": "#66a61e",
    "Censor_uw": "#e6ab02",
    "PH": "#a6761d",
}


def _color(name: str, i: int) -> str:
    return PALETTE.get(
        name.split(" ")[0], plt.rcParams["axes.prop_cycle"].by_key()["color"][i % 10]
    )


MAX_COLUMNS = 2
"""Panels per row: a figure stays about 8 inches wide, readable in the book's column."""


def panel_axes(
    n: int,
    *,
    height: float = 3.6,
    sharex: bool = False,
    sharey: bool = False,
) -> tuple[Figure, list]:
    """A figure of ``n`` panels, at most :data:`MAX_COLUMNS` per row, :data:`WIDTH` wide;
    ``height`` inches per row; unused axes hidden."""
    cols = min(n, MAX_COLUMNS)
    rows = -(-n // cols)
    fig, grid = plt.subplots(
        rows,
        cols,
        figsize=(WIDTH, height * rows),
        squeeze=False,
        sharex=sharex,
        sharey=sharey,
    )
    axes = list(grid.ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def violins(
    frame: pd.DataFrame,
    value: str,
    group: str,
    *,
    panel: str | None = None,
    order: Sequence[str] | None = None,
    hline: float | dict | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    panel_fmt: str = "{}",
) -> Figure:
    """Violin plot of ``value`` by ``group``, one panel per value of ``panel``.

    ``hline`` draws a dashed reference line (one value, or a dict per panel),
    e.g. the target eps/2 or the generating distribution's quantile.
    """
    panels = [None] if panel is None else list(dict.fromkeys(frame[panel]))
    groups = list(order) if order is not None else list(dict.fromkeys(frame[group]))
    fig, axes = panel_axes(len(panels), sharey=True)
    for ax, p in zip(axes, panels, strict=True):
        sub = frame if p is None else frame[frame[panel] == p]
        present = [g for g in groups if (sub[group] == g).any()]
        data = [sub.loc[sub[group] == g, value].dropna().to_numpy(dtype=float) for g in present]
        keep = [i for i, d in enumerate(data) if d.size]
        if keep:
            parts = ax.violinplot([data[i] for i in keep], positions=keep, showmedians=True)
            for body, i in zip(parts["bodies"], keep, strict=True):
                body.set_facecolor(_color(present[i], i))
                body.set_alpha(0.7)
            for i in keep:
                if data[i].size == 1 or np.ptp(data[i]) == 0:
                    ax.plot([i], [data[i][0]], "o", color=_color(present[i], i))
        ax.set_xticks(range(len(present)), present, rotation=30, ha="right")
        ref = hline.get(p) if isinstance(hline, dict) else hline
        if ref is not None:
            ax.axhline(ref, ls="--", color="k", lw=1)
        if p is not None:
            ax.set_title(panel_fmt.format(p))
    for ax in axes[:: min(len(axes), MAX_COLUMNS)]:
        ax.set_ylabel(ylabel or value)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def lipschitz_vs_weights(
    panels: dict[str, tuple[np.ndarray, np.ndarray]], *, title: str | None = None
) -> Figure:
    """Scatter of record-level Lipschitz bounds (y) against weights (x), one panel per synthesizer.

    ``panels[name] = (alpha, record_bounds)``; the dashed line marks the database
    bound Delta = max_i Delta_i (vector-weighted paper, Figures 4, 5, 8, 9).
    """
    fig, axes = panel_axes(len(panels), sharex=True, sharey=True)
    for i, (ax, (name, (alpha, bounds))) in enumerate(zip(axes, panels.items(), strict=True)):
        ax.scatter(alpha, bounds, s=6, alpha=0.5, color=_color(name, i))
        ax.axhline(np.max(bounds), ls="--", color="red", lw=1)
        ax.set_xlabel("weight $\\alpha_i$")
        ax.set_title(name)
    for ax in axes[:: min(len(axes), MAX_COLUMNS)]:
        ax.set_ylabel("record Lipschitz bound $\\Delta_{\\alpha,x_i}$")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def densities(
    samples: dict[str, np.ndarray],
    *,
    xlabel: str = "",
    bins: int = 60,
    range_: tuple[float, float] | None = None,
    title: str | None = None,
) -> Figure:
    """Overlaid density (normalized histogram outlines) of confidential and synthetic data."""
    fig, ax = plt.subplots(figsize=(WIDTH, 4.2))
    all_values = np.concatenate([np.asarray(v, float).ravel() for v in samples.values()])
    lo, hi = range_ or (np.quantile(all_values, 0.001), np.quantile(all_values, 0.999))
    edges = np.linspace(lo, hi, bins + 1)
    for i, (name, values) in enumerate(samples.items()):
        ax.hist(
            np.asarray(values, float).ravel(),
            bins=edges,
            density=True,
            histtype="step",
            lw=2.2 if name == "Data" else 1.4,
            color=_color(name, i),
            label=name,
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    ax.legend()
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def lines(
    frame: pd.DataFrame,
    x: str,
    y: str,
    group: str,
    *,
    panel: str | None = None,
    hline: float | None = None,
    logx: bool = False,
    ylabel: str | None = None,
    title: str | None = None,
) -> Figure:
    """Line plot of ``y`` against ``x`` for each ``group`` (e.g. coverage against m)."""
    panels = [None] if panel is None else list(dict.fromkeys(frame[panel]))
    fig, axes = panel_axes(len(panels), sharey=True)
    for ax, p in zip(axes, panels, strict=True):
        sub = frame if p is None else frame[frame[panel] == p]
        for i, (name, g) in enumerate(sub.groupby(group, sort=False)):
            g = g.sort_values(x)
            ax.plot(g[x], g[y], marker="o", ms=3, label=str(name), color=_color(str(name), i))
        if hline is not None:
            ax.axhline(hline, ls="--", color="k", lw=1)
        if logx:
            ax.set_xscale("log")
        ax.set_xlabel(x)
        if p is not None:
            ax.set_title(f"{panel} = {p}")
    for ax in axes[:: min(len(axes), MAX_COLUMNS)]:
        ax.set_ylabel(ylabel or y)
    axes[-1].legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- modips (Liu, Sec 5)

MODIPS_COLORS = {
    "bit": "#1b9e77",
    "truncation": "#d95f02",
    "thm7": "#1b9e77",
    "rubin": "#7570b3",
    "raghunathan": "#e7298a",
    "raab": "#d95f02",
    "single": "#666666",
    "empirical SD": "#000000",
}

MODIPS_LABELS = {
    "bias": "bias",
    "sd_estimate": "SD estimate",
    "coverage": "coverage of 95% CI",
    "ci_half_width": "95% CI half width",
    "empirical_sd": "empirical SD",
}


def metric_grid(
    frame: pd.DataFrame,
    x: str,
    metrics: Sequence[str],
    *,
    panel: str,
    group: str,
    hlines: Mapping[str, float | Mapping[str, float]] | None = None,
    markers: pd.DataFrame | None = None,
    marker_label: str = "",
    logx: bool = False,
    xlabel: str | None = None,
    title: str | None = None,
) -> Figure:
    """Grid of line plots: one row per metric, one column per ``panel`` value, a line per ``group``;
    at most :data:`MAX_COLUMNS` panels side by side, further panels in blocks of rows below.

    ``hlines[metric]`` draws a dashed reference line (one value, or a dict per panel value, e.g.
    the original-data SD). ``markers`` (same columns as ``frame``) are drawn as stars in the
    group's colour, e.g. communal sanitization at its equivalent w (Liu Figure 8).
    """
    panels = list(dict.fromkeys(frame[panel]))
    groups = list(dict.fromkeys(frame[group]))
    known = list(MODIPS_COLORS)
    groups.sort(key=lambda g: known.index(g) if g in known else len(known))
    # At most MAX_COLUMNS panels side by side: more panels go to a second block of rows
    # below (a 4-panel, 3-metric grid is 6 rows of 2, readable in a 500 px window).
    cols = min(len(panels), MAX_COLUMNS)
    blocks = -(-len(panels) // cols)
    nrows = blocks * len(metrics)
    height = 2.6 * nrows + 0.7
    fig, axes = plt.subplots(
        nrows,
        cols,
        figsize=(WIDTH, height),
        squeeze=False,
        sharex=True,
    )
    hlines = hlines or {}
    for j, p in enumerate(panels):
        sub = frame[frame[panel] == p]
        block, col = divmod(j, cols)
        for i, metric in enumerate(metrics):
            ax = axes[block * len(metrics) + i][col]
            for k, name in enumerate(groups):
                g = sub[sub[group] == name].sort_values(x)
                if g.empty:
                    continue
                color = MODIPS_COLORS.get(str(name), f"C{k}")
                _group_line(ax, g, x, metric, str(name), color)
                if markers is not None:
                    mk = markers[(markers[panel] == p) & (markers[group] == name)]
                    label = f"{name}, {marker_label}" if marker_label else None
                    ax.plot(mk[x], mk[metric], "*", ms=9, color=color, ls="none", label=label)
            ref = hlines.get(metric)
            _dress_axis(ax, ref.get(p) if isinstance(ref, Mapping) else ref, logx)
            if i == 0:
                ax.set_title(str(p))
            if col == 0:
                ax.set_ylabel(MODIPS_LABELS.get(metric, metric))
            if i == len(metrics) - 1:
                ax.set_xlabel(xlabel or x)
                ax.xaxis.set_tick_params(labelbottom=True)  # every block shows its x axis
    for j in range(len(panels), blocks * cols):  # an odd panel count leaves empty slots
        block, col = divmod(j, cols)
        for i in range(len(metrics)):
            axes[block * len(metrics) + i][col].set_visible(False)
    _legend_above(fig, axes[0][cols - 1], title, height)
    return fig


def _group_line(ax: Axes, g: pd.DataFrame, x: str, metric: str, name: str, color: str) -> None:
    """One group's line of a :func:`metric_grid` panel (dashed for the empirical SD)."""
    style = "--" if name == "empirical SD" else "-"
    ax.plot(g[x], g[metric], style, marker="o", ms=2.5, lw=1.2, color=color, label=name)


def _dress_axis(ax: Axes, ref: float | None, logx: bool) -> None:
    """A dotted reference line at ``ref`` (if any) and a log x axis (if ``logx``)."""
    if ref is not None:
        ax.axhline(ref, ls=":", color="k", lw=1)
    if logx:
        ax.set_xscale("log")


def _legend_above(fig: Figure, ax: Axes, title: str | None, height: float) -> None:
    """Legend (from ``ax``) and title above the panels (figures are saved bbox "tight")."""
    handles, labels = ax.get_legend_handles_labels()
    ncol = min(len(labels), 3) or 1
    fig.tight_layout()
    fig.legend(handles, labels, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, 1.0))
    if title:
        rows = -(-len(labels) // ncol)
        fig.suptitle(title, y=1 + (0.32 * rows + 0.1) / height, va="bottom")


def slant_x_tick_labels(fig: Figure, angle: float = 90.0) -> None:
    """Turn every x tick label of ``fig`` by ``angle`` degrees (default upright), anchored at
    its right end, and re-lay out: long category names then stand side by side. Upright,
    because the overlap test compares the labels' bounding boxes, which a slant widens."""
    for ax in fig.get_axes():
        for label in ax.get_xticklabels():
            label.set_rotation(angle)
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    if not fig.get_constrained_layout():
        fig.tight_layout()


def tick_label_overlaps(fig: Figure, pad: float = 1.0) -> list[str]:
    """Pairs of tick labels of one axis that overlap when ``fig`` is drawn, as text.

    Draws the figure once and compares the window extents (pixels, from the figure's
    renderer) of neighbouring visible tick labels of every visible axis, major and minor,
    within the axis' view limits; ``pad`` pixels of clearance are required between two
    labels. An empty list means every tick label can be read.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found: list[str] = []
    for ax in fig.get_axes():
        if not ax.get_visible():
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            lo, hi = sorted(axis.get_view_interval())
            span = (hi - lo) * 1e-9
            boxes = []
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                label = tick.label1
                loc = tick.get_loc()
                if loc is None or not (lo - span <= loc <= hi + span):
                    continue
                if not (tick.get_visible() and label.get_visible() and label.get_text().strip()):
                    continue
                boxes.append((label.get_window_extent(renderer), label.get_text()))
            key = (lambda b: b[0].x0) if name == "x" else (lambda b: b[0].y0)
            boxes.sort(key=key)
            for (a, ta), (b, tb) in zip(boxes, boxes[1:], strict=False):
                if a.padded(pad / 2).overlaps(b.padded(pad / 2)):
                    where = (
                        ax.get_title() or ax.get_ylabel() or f"axes {fig.get_axes().index(ax) + 1}"
                    )
                    found.append(f"{name} axis of {where!r}: {ta!r} and {tb!r}")
                    break
    return found
