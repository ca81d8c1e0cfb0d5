"""Investigation: Liu's Table 1(a) at the printed n against the n that reproduces it.

For ``book/choices.md`` (section "Chosen readings") and issue 54. Table 1(a) prints n = 10 and
100 for its binary rows; notebook 07 runs them at n = 100 and 1000, which reproduce the printed
coverages. This script runs the literal reading at paper scale (the ``paper`` profile of
``dpsynth.studies.modips_sections``: 5,000 repetitions, m = 10, the same seed as notebook 07's
Table 1) with :func:`~dpsynth.studies.modips_sections.section52_literal`, and counts the cells of
Table 1(a) that agree with the paper under the one criterion
(:func:`~dpsynth.studies.modips_sections.table1_agreement`), beside the same count for the
committed paper-scale run at n = 100 / 1000 (``results/07_modips_inference/table1.csv``).

    .venv/bin/python benchmarks/investigations/liu_table1_literal.py

A few minutes on one core; the JSON file beside its CSV records the last run's wall time.
"""

from __future__ import annotations

import time

import pandas as pd
from _record import write

from dpsynth.studies import modips_sections as ms
from dpsynth.studies.results import load


def paired(frame: pd.DataFrame, rules: list[str]) -> pd.DataFrame:
    """A flattened ``table1`` (columns "<rule> | <source>") back as (rule, source) columns."""
    return pd.concat(
        {
            (rule, source): pd.to_numeric(frame[f"{rule} | {source}"], errors="coerce")
            for rule in rules
            for source in ("paper", "run")
        },
        axis=1,
    )


def main() -> None:
    start = time.perf_counter()
    cfg = ms.settings("paper", workers=1)
    lit = ms.table1(ms.section52_literal(cfg), literal=True)
    committed = load("07_modips_inference").get("table1")
    rules = [c.split(" | ")[0] for c in committed.columns if c.endswith(" | paper")]
    chosen = paired(committed, rules).xs("binary", level="data", drop_level=False)
    literal = paired(
        pd.DataFrame(
            {f"{r} | {s}": lit[(r, s)] for r in rules for s in ("paper", "run")},
            index=lit.index,
        ),
        rules,
    )
    reps = int(cfg["reps"])

    def agreeing(frame: pd.DataFrame) -> int:
        cells = int(frame.xs("paper", axis=1, level=1).notna().sum().sum())
        return round(ms.table1_agreement(frame, reps) * cells)

    values: dict[str, float] = {
        "reps": reps,
        "cells": int(literal.xs("paper", axis=1, level=1).notna().sum().sum()),
        "agree_literal": agreeing(literal),
        "agree_chosen": agreeing(chosen),
    }
    for rule in rules:
        one = literal[[(rule, "paper"), (rule, "run")]]
        values[f"agree_literal_{rule}"] = agreeing(one)
        values[f"agree_chosen_{rule}"] = agreeing(chosen[[(rule, "paper"), (rule, "run")]])
        values[f"max_gap_literal_{rule}"] = float(
            (one[(rule, "run")] - one[(rule, "paper")]).abs().max()
        )
    write("liu_table1_literal", values, {**cfg, "reading": "binary n as printed (10, 100)"}, start)


if __name__ == "__main__":
    main()
