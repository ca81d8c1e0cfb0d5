"""Figures of notebook 07 (Liu, Section 5): metrics against m, ε or w, panel by scenario.

matplotlib only; the library never imports this. Each function takes a tidy frame of
:mod:`dpsynth.studies_modips` (one row per setting x m x rule), draws a new figure and returns it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

COLORS = {
    "bit": "#1b9e77",
    "truncation": "#d95f02",
    "thm7": "#1b9e77",
    "rubin": "#7570b3",
    "raghunathan": "#e7298a",
    "raab": "#d95f02",
    "single": "#666666",
    "empirical SD": "#000000",
}

LABELS = {
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
    """Grid of line plots: one row per metric, one column per ``panel`` value, a line per ``group``.

    ``hlines[metric]`` draws a dashed reference line (one value, or a dict per panel value, e.g.
    the original-data SD). ``markers`` (same columns as ``frame``) are drawn as stars in the
    group's colour, e.g. communal sanitization at its equivalent w (Liu Figure 8).
    """
    panels = list(dict.fromkeys(frame[panel]))
    groups = list(dict.fromkeys(frame[group]))
    known = list(COLORS)
    groups.sort(key=lambda g: known.index(g) if g in known else len(known))
    height = 2.3 * len(metrics) + 0.5
    fig, axes = plt.subplots(
        len(metrics),
        len(panels),
        figsize=(3.1 * len(panels) + 0.6, height),
        squeeze=False,
        sharex=True,
    )
    hlines = hlines or {}
    for j, p in enumerate(panels):
        sub = frame[frame[panel] == p]
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for k, name in enumerate(groups):
                g = sub[sub[group] == name].sort_values(x)
                if g.empty:
                    continue
                color = COLORS.get(str(name), f"C{k}")
                style = "--" if str(name) == "empirical SD" else "-"
                ax.plot(
                    g[x], g[metric], style, marker="o", ms=2.5, lw=1.2, color=color, label=str(name)
                )
                if markers is not None:
                    mk = markers[(markers[panel] == p) & (markers[group] == name)]
                    ax.plot(
                        mk[x],
                        mk[metric],
                        "*",
                        ms=9,
                        color=color,
                        ls="none",
                        label=f"{name}, {marker_label}" if marker_label else None,
                    )
            ref = hlines.get(metric)
            if isinstance(ref, Mapping):
                ref = ref.get(p)
            if ref is not None:
                ax.axhline(ref, ls=":", color="k", lw=1)
            if logx:
                ax.set_xscale("log")
            if i == 0:
                ax.set_title(str(p), fontsize=9)
            if j == 0:
                ax.set_ylabel(LABELS.get(metric, metric), fontsize=9)
            if i == len(metrics) - 1:
                ax.set_xlabel(xlabel or x)
            ax.tick_params(labelsize=8)
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=min(len(labels), 6),
        frameon=False,
        fontsize=8,
        bbox_to_anchor=(0.5, 1.0),
    )
    if title:
        fig.suptitle(title, y=1 + 0.25 / height, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / height))
    return fig
