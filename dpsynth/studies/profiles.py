"""Named parameter profiles of the notebooks: ``paper`` as published, ``ci`` as overrides of it.

Each study states its ``paper`` settings once and its ``ci`` profile as the few keys that
differ (:func:`derive_profiles`), so the two cannot drift apart by accident.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dpsynth.errors import InputError

STUDY_RHAT_MAX = 1.05
"""Largest R-hat a study's Monte Carlo fit may have (its convergence check; the one place).

Looser than the release's :data:`dpsynth.diagnostics.CONVERGENCE` (R-hat <= 1.01), and on
purpose: a study's replicate fits are summarized over replicates (averages, medians, tables
beside the paper's), never published one by one, and the ``ci`` profiles' short chains give
R-hat values near 1.01 that a 1.01 threshold would fail by chance. A release fit, published
alone, keeps 1.01. Used by :func:`dpsynth.studies.notebook.check_convergence` (its default),
the vector-weighted studies' ``max_rhat`` setting and the notebooks' checks.
"""


def apply_profile(
    profiles: Mapping[str, Mapping[str, Any]], profile: str, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """A copy of ``profiles[profile]`` with the non-None ``overrides`` applied.

    ``None`` keeps the profile's value, so a notebook's parameters cell can pass all its
    knobs unconditionally. Unknown profiles and keys raise InputError naming them.
    """
    if profile not in profiles:
        raise InputError("profile", f"must be one of {', '.join(profiles)} (got {profile!r})")
    cfg = copy.deepcopy(dict(profiles[profile]))
    for key, value in overrides.items():
        if key not in cfg:
            raise InputError(key, f"unknown setting; choose among {', '.join(cfg)}")
        if value is not None:
            cfg[key] = value
    return cfg


def derive_profiles(
    paper: Mapping[str, Any], **overrides: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """``{"paper": paper, name: paper | overrides[name], ...}``; override keys must exist."""
    out = {"paper": dict(paper)}
    for name, diff in overrides.items():
        unknown = sorted(set(diff) - set(paper))
        if unknown:
            raise InputError(name, f"overrides unknown setting(s): {', '.join(unknown)}")
        out[name] = {**paper, **diff}
    return out


CI_MCMC: dict[str, int] = {"chains": 4, "iter_warmup": 300, "iter_sampling": 300, "n_jobs": 1}
"""The ``ci`` profiles' short MCMC runs (4 chains x (300 + 300)), replicates in-process."""
