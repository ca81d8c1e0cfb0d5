"""The knobs of each notebook: what a reader may set with ``papermill -p NAME VALUE``.

One declaration per notebook (its parameters cell, by name, with the values each knob takes),
used by :func:`dpsynth.studies.notebook.check_knobs` in the cell after the parameters cell,
by the rerun page's table (``book/rerun.md``) and by ``tests/test_studies_notebook.py``, which
checks that every notebook's parameters cell declares exactly these names.

A value spec is a tuple of allowed values or a kind of
:data:`dpsynth.studies.notebook.KNOB_KINDS`, optionally ending in ``" or None"`` (None: the
profile's value).
"""

from __future__ import annotations

PROFILE = ("ci", "paper")
"""Every notebook's ``profile``: ``ci`` (small and fast) or ``paper`` (as published)."""

_SEED = "non-negative int or None"

KNOBS: dict[str, dict[str, str | tuple]] = {
    "01_beta_censoring": {
        "profile": PROFILE,
        "epsilons": "list of positive numbers or None",
        "R": "positive int or None",
        "n": "positive int or None",
        "seed": _SEED,
        "n_jobs": "positive int or None",
    },
    "02_sdr_censoring": {
        "profile": PROFILE,
        "epsilon": "positive number or None",
        "n": "positive int or None",
        "seed": _SEED,
        "data_path": "path or None",
    },
    "03_vector_weighting": {
        "profile": PROFILE,
        "n": "positive int or None",
        "m": "positive int or None",
        "seed": _SEED,
    },
    "04_reweighting": {
        "profile": PROFILE,
        "n": "positive int or None",
        "m": "positive int or None",
        "seed": _SEED,
    },
    "05_sdr_salary": {
        "profile": PROFILE,
        "data_path": "path or None",
        "n": "positive int or None",
        "m": "positive int or None",
        "seed": _SEED,
    },
    "06_local_to_global": {
        "profile": PROFILE,
        "R": "positive int or None",
        "n": "positive int or None",
        "seed": _SEED,
        "n_jobs": "positive int or None",
        "use_cache": "bool",
    },
    "07_modips_inference": {
        "profile": PROFILE,
        "reps": "positive int or None",
        "m_grid": "list of positive ints or None",
        "epsilon": "positive number or None",
        "seed": _SEED,
        "workers": "positive int or None",
    },
    "08_synthesize_your_own": {
        "profile": PROFILE,
        "data_path": "path or None",
        "n_records": "positive int or None",
        "epsilon": "positive number",
        "m": "positive int",
        "seed": "non-negative int",
    },
    "09_real_data": {
        "profile": PROFILE,
        "epsilons": "list of positive numbers or None",
        "n": "positive int or None",
        "seed": _SEED,
    },
    "10_whole_table": {
        "profile": PROFILE,
        "epsilon": "positive number or None",
        "n": "positive int or None",
        "seed": _SEED,
    },
}
"""Notebook stem -> {knob: allowed values}, in the order of its parameters cell."""
