"""Named parameter profiles of the notebooks: ``paper`` as published, ``ci`` as overrides of it.

Also the one settings validator of the studies (:class:`Setting`, :func:`check_settings`,
:func:`profile_settings`): each study declares what each of its settings must be, in a table.

Each study states its ``paper`` settings once and its ``ci`` profile as the few keys that
differ (:func:`derive_profiles`), so the two cannot drift apart by accident.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsynth.errors import InputError

STUDY_RHAT_MAX = 1.05
"""Largest R-hat a study's Monte Carlo fit may have (its convergence check; the one place).

Looser than the release's :data:`dpsynth.engine.diagnostics.CONVERGENCE` (R-hat <= 1.01), and on
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


@dataclass(frozen=True)
class Setting:
    """What one study setting must be; :func:`check_settings` checks and normalizes it.

    ``kind``: "int" (an integer, not a bool), "number" (an int or float, not a string),
    "float" (anything ``float()`` reads), "choice" (one of ``choices``), "bool", "path" (kept as
    text), or "list" (of ``item`` values; a single number is a list of one when ``scalar_ok``;
    ``order`` "given", "ascending" or "descending"; repeats rejected (``unique``) or merged).
    ``test`` the value must pass (after conversion) and ``must`` what the message says it must
    be ("be an integer >= 10"); ``optional``: None is allowed.
    """

    kind: str
    must: str = ""
    test: Callable[[Any], bool] = lambda v: True
    optional: bool = False
    choices: tuple = ()
    item: Setting | None = None
    order: str = "given"
    unique: bool = False
    scalar_ok: bool = False


def integer(minimum: int, optional: bool = False) -> Setting:
    """An integer >= ``minimum`` (a count, a seed)."""
    return Setting("int", f"be an integer >= {minimum}", lambda v: v >= minimum, optional)


def check_settings(cfg: dict[str, Any], rules: Mapping[str, Setting]) -> dict[str, Any]:
    """Check and normalize every setting of ``rules`` in ``cfg`` (in place; returns ``cfg``).

    Raises InputError naming the first setting that is not what its rule says.
    """
    for key, rule in rules.items():
        cfg[key] = _checked(key, cfg[key], rule)
    return cfg


def profile_settings(
    profiles: Mapping[str, Mapping[str, Any]],
    profile: str,
    overrides: Mapping[str, Any],
    rules: Mapping[str, Setting],
    check: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """A study's ``settings()``: the profile with overrides (:func:`apply_profile`), every
    value checked by ``rules`` (:func:`check_settings`), then ``check`` (rules across several
    settings), with ``profile`` added."""
    cfg = check_settings(apply_profile(profiles, profile, overrides), rules)
    if check is not None:
        check(cfg)
    cfg["profile"] = profile
    return cfg


def _checked(key: str, value: Any, rule: Setting) -> Any:
    """``value`` normalized by ``rule``, else InputError(key)."""
    if value is None and rule.optional:
        return None
    if rule.kind == "list":
        return _checked_list(key, value, rule)
    if rule.kind == "path":
        return str(value)
    if rule.kind == "choice":
        if value not in rule.choices:
            raise InputError(key, f"must be one of {', '.join(map(str, rule.choices))}")
        return value
    if rule.kind == "bool":
        if not isinstance(value, bool):
            raise InputError(key, f"must be True or False (got {value!r})")
        return value
    return _checked_number(key, value, rule)


def _checked_number(key: str, value: Any, rule: Setting) -> int | float:
    """An "int", "number" or "float" setting (see :class:`Setting`)."""
    either = " or None" if rule.optional else ""
    if rule.kind == "float":
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise InputError(key, f"must be a number (got {value!r})") from None
    else:
        kinds = (int, np.integer) if rule.kind == "int" else (int, float, np.integer, np.floating)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise InputError(key, f"must {rule.must}{either} (got {value!r})")
        v = value
    if not (np.isfinite(v) and rule.test(v)):
        raise InputError(key, f"must {rule.must}{either} (got {value!r})")
    return int(v) if rule.kind == "int" else float(v)


def _checked_list(key: str, value: Any, rule: Setting) -> list | tuple:
    """A "list" setting: each item checked by ``rule.item``, then ordered (see :class:`Setting`)."""
    if rule.scalar_ok and isinstance(value, int | float | np.integer | np.floating):
        value = [value]
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise InputError(key, f"must be a list of values (got {value!r})")
    if len(value) == 0:
        raise InputError(key, "must not be empty")
    assert rule.item is not None
    items = [_checked(key, v, rule.item) for v in value]
    if rule.unique and len(set(items)) != len(items):
        raise InputError(key, f"must not repeat a value (got {items})")
    if rule.order == "given":
        return items
    return tuple(sorted(set(items), reverse=rule.order == "descending"))
