"""Checks that a user's Stan program really is the mechanism it claims to be.

A user program (``--stan-file``) can write anything in its target and its generated
quantities, so before a release is labelled DP dpsynth tests it, by differential
evaluation of the compiled program (:func:`check_program`):

* ``outputs``: synthesis reads no data. Its outputs other than the per-record
  contributions (``y_rep``, transformed parameters, other generated quantities) are
  unchanged when the outcome, weights and centres are replaced by public stand-ins
  (:func:`dpsynth.models.synthesis.public_data`). Synthesis always runs on those stand-ins
  anyway: a program that fails this check could not copy data into a release, but it
  is not the program it claims to be.

For a censored release (Hu, Williams & Savitsky, Section 3: every per-record term in
[-M, M], the target the prior plus the sum of those terms and nothing else that depends
on the data), at retained posterior draws and at draws of the program's own prior:

* ``prior``: the target at alpha = 0 does not change when the outcome is replaced (by the
  placeholder, and one record at a time): no data-dependent prior, no unweighted or
  unclamped likelihood term, no transformed data of ``y`` in the target;
* ``locality``: changing record j changes no ``contrib[k]`` for k != j (at M and at a
  bound so wide that the clamp is inactive, where a term could otherwise hide);
* ``clamp``: every ``contrib`` lies in [-M, M];
* ``sum``: target - target(alpha = 0) = sum of ``contrib``, for the data and for each
  data set with one record changed.

These are tests at finitely many parameter values and records, not a proof: a program
built to pass them could still break the guarantee elsewhere. So a whole user program is
never labelled DP: its release says "not established" and these checks are a warning layer
that refuses what they catch. A DP label needs the model as pieces (:mod:`dpsynth.models.pieces`),
private by construction. What the checks do against programs built to pass them:

* the prior tolerance is absolute (:data:`PRIOR_ATOL`), so a constant added to the target
  cannot widen it;
* the changed records include values beyond the current maximum and minimum and scaled
  halves of the records, so changes move order statistics and sums;
* the stand-in outcome of the prior test is a random mix of public values, not a constant;
* under add-remove neighbours a record is also removed (n changes);
* the random changes draw from the operating system's entropy; the evaluations' own seeds
  are fixed by httpstan (PyStan), so a program may not call an ``_rng`` function in its
  transformed data (refused by :func:`check_convention`), the one place where it could
  tell a check evaluation from the fit.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dpsynth import engine
from dpsynth.engine import log_density, outputs_at
from dpsynth.errors import InputError
from dpsynth.models.synthesis import PLACEHOLDERS, public_data
from dpsynth.privacy import relations

RTOL = 1e-6
"""Relative tolerance of the target identity (Stan's log density is computed in doubles)."""
PRIOR_ATOL = 1e-8
"""Absolute tolerance of the alpha = 0 target under a replaced outcome (it should not move;
absolute, so that a large constant in the target cannot widen it)."""
N_POINTS = 4
"""Parameter values tested: this many retained posterior draws, and as many prior draws."""
WIDE_M = 1e6
"""A second, public bound at which locality and the sum are also tested (clamp inactive)."""
RECORDS = 3
"""Records changed one at a time in the locality test (first, middle, last position)."""
SUBSETS = 24
"""Random halves of the records changed at once: a dependence between two records escapes
all of them with probability (3/4)^24 = 0.1%."""
PRIOR_SAMPLER = {"chains": 1, "iter_warmup": 300, "iter_sampling": 200}
"""The short NUTS run of the program at alpha = 0 on public stand-in data (its prior)."""

CHECKS = {
    "outputs": "outputs other than the per-record contributions (y_rep included) are "
    "unchanged when the outcome, weights and centres are replaced by public stand-ins",
    "prior": "the target at alpha = 0 is unchanged when the outcome is replaced",
    "locality": "changing record j changes only contrib[j]",
    "clamp": "every contrib lies in [-M, M]",
    "sum": "target - target(alpha = 0) equals the sum of contrib",
}
"""The differential tests of :func:`check_program`, by name (the report lists those run)."""


def _refuse(check: str, detail: str) -> InputError:
    return InputError(
        "stan_file",
        f"the program fails the check '{check}': {detail}; it cannot be labelled DP (the "
        "book's page 'Bringing your own Stan model' lists what a program may do)",
    )


def check_program(
    synthesizer: Any,
    data: Mapping[str, Any],
    fit: engine.StanFit,
    censor_bound: float | None,
    *,
    seed: int,
    neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
) -> dict[str, Any]:
    """Run the differential tests on a user program; return what the public report states.

    ``synthesizer`` (a :class:`dpsynth.mechanisms.posterior.Synthesizer`) gives the program, the
    backend and the public placeholder outcome; ``data`` and ``fit`` are the fit's Stan
    data and draws. ``censor_bound`` M (None: not a censored release, only ``outputs``
    runs). ``neighbours``: under add-remove the prior test also removes a record. Raises
    InputError(``stan_file``) naming the first failed check; no value is ever shown.
    """
    stan_file, backend = synthesizer.model.stan_file, synthesizer.sampler.backend
    data = dict(data)
    n = int(data["n"])
    picks = np.unique(np.linspace(0, fit.n_draws - 1, min(N_POINTS, fit.n_draws)).astype(int))
    posterior = [fit.draw(int(s)) for s in picks]
    value = synthesizer.placeholder(data, posterior[0])
    _check_outputs(stan_file, data, public_data(data, value, n), posterior, backend)
    run = ["outputs"]
    points = {"posterior_draws": len(posterior), "prior_draws": 0, "records_changed": 0}
    if censor_bound is not None:
        prior = _prior_draws(stan_file, public_data(data, value, n), seed, backend)
        params = posterior + prior
        records = tuple(sorted({0, n // 2, n - 1}))[:RECORDS]
        values = (value, *PLACEHOLDERS.get(synthesizer.model.outcome, PLACEHOLDERS["real"]))
        check_censored(
            stan_file,
            data,
            params,
            censor_bound,
            records=records,
            values=values,
            subsets=SUBSETS,
            backend=backend,
            outcome=synthesizer.model.outcome,
            neighbours=neighbours,
        )
        run += ["prior", "locality", "clamp", "sum"]
        points.update(
            prior_draws=len(prior), records_changed=len(records), random_halves_changed=SUBSETS
        )
    return {
        "checks": {name: CHECKS[name] for name in run},
        **points,
        "note": (
            "differential tests of the compiled program at these parameter values and "
            "records, not a proof that the program is the mechanism it claims to be"
        ),
    }


def _check_outputs(stan_file, data, public, params, backend) -> None:
    full = dict(data, want_contrib=0, want_rep=1)
    with_data = outputs_at(stan_file, full, params, backend=backend)
    without = outputs_at(stan_file, public, params, backend=backend)
    for a, b in zip(with_data, without, strict=True):
        for name in a:
            if name in engine.RECORD_OUTPUTS:
                continue
            same = name in b and np.shape(a[name]) == np.shape(b[name])
            if not same or not np.array_equal(a[name], b[name], equal_nan=True):
                raise _refuse("outputs", f"`{name}` depends on the confidential data")


def _prior_draws(stan_file, public, seed, backend) -> list[dict[str, Any]]:
    """Draws of the program's prior: NUTS at alpha = 0 on the public stand-in data."""
    prior_data = dict(public, want_rep=0)
    try:
        prior = engine.fit(
            stan_file,
            prior_data,
            seed=seed % (2**31),
            backend=backend,
            **PRIOR_SAMPLER,
        )
    except InputError:
        raise _refuse_prior() from None
    picks = np.linspace(0, prior.n_draws - 1, N_POINTS).astype(int)
    draws = [prior.draw(int(s)) for s in picks]
    values = log_density(stan_file, prior_data, draws, backend=backend)
    finite = [d for d, v in zip(draws, values, strict=True) if np.isfinite(v)]
    if len(finite) < 2:
        raise _refuse_prior()
    return finite


def _refuse_prior() -> InputError:
    return InputError(
        "stan_file",
        "the program's prior (its target at alpha = 0) could not be sampled; a censored "
        "posterior needs a proper prior that does not depend on the data",
    )


def _beyond(y: np.ndarray, outcome: str) -> tuple[Any, Any]:
    """Values beyond the current maximum and minimum of ``y`` that stay in the support of
    ``outcome`` (a change that moves order statistics and sums)."""
    hi, lo = float(np.max(y)), float(np.min(y))
    if outcome == "count":
        return y.dtype.type(hi + 1 + abs(hi)), y.dtype.type(lo // 2 if lo > 0 else lo + 1)
    if outcome == "unit":
        return (hi + 1) / 2, lo / 2
    if outcome == "positive":
        return hi + 1 + hi, lo / 2
    return hi + 1 + abs(hi), lo - 1 - abs(lo)


def _changes(
    y: np.ndarray,
    records: tuple[int, ...],
    values: tuple[float, ...],
    subsets: int,
    rng: np.random.Generator,
    outcome: str = "real",
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Changed outcomes for the differential tests: (label, changed positions, new y).

    Each of ``records`` alone, set to the first public value it does not equal, then to a
    value beyond the current maximum and one beyond the minimum (:func:`_beyond`: order
    statistics and sums move); then ``subsets`` random halves of the records, each given
    another record's outcome of the same half (a rotation: realistic values), every
    second half also scaled (its sum moves). A dependence of record i's term on record j
    is caught with probability 1/4 per subset.
    """
    out = []
    top, bottom = _beyond(y, outcome)
    for j in records:
        new = np.array(y, copy=True)
        new[j] = next(v for v in values if v != y[j])
        out.append((f"record {j + 1} changed", np.array([j]), new))
        for label, value in (("beyond the maximum", top), ("beyond the minimum", bottom)):
            if value != y[j]:
                new = np.array(y, copy=True)
                new[j] = value
                out.append((f"record {j + 1} moved {label}", np.array([j]), new))
    n = y.size
    for k in range(subsets if n > 2 else 0):
        half = np.sort(rng.choice(n, size=n // 2, replace=False))
        new = np.array(y, copy=True)
        new[half] = y[np.roll(half, 1)]
        if k % 2 == 1:
            new[half] = _scaled(new[half], outcome)
        out.append((f"random half {k + 1} of the records changed", half, new))
    return out


def _scaled(values: np.ndarray, outcome: str) -> np.ndarray:
    """Outcomes scaled within the support of ``outcome`` (doubled; halved on (0, 1))."""
    if outcome == "unit":
        return values / 2
    if outcome == "count":
        return values * 2 + 1
    return values * 2


def _mixed_placeholder(
    n: int, values: tuple[float, ...], dtype: Any, rng: np.random.Generator
) -> np.ndarray:
    """A stand-in outcome that is not constant: public values drawn at random per record."""
    return np.asarray(rng.choice(np.asarray(values), size=n)).astype(dtype)


def check_censored(
    stan_file: str | Path,
    data: Mapping[str, Any],
    params: list[Mapping[str, Any]],
    censor_bound: float,
    *,
    records: tuple[int, ...] = (0,),
    values: tuple[float, ...] = PLACEHOLDERS["real"],
    subsets: int = 0,
    backend: str | None = None,
    outcome: str = "real",
    neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
    inputs: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """The censoring tests ``prior``, ``clamp``, ``sum`` and ``locality`` (:data:`CHECKS`).

    At each of ``params`` (constrained parameter values), with the outcomes changed as
    :func:`_changes` says (``records`` one at a time, then ``subsets`` random halves,
    drawn from the operating system's entropy so a program cannot anticipate them), at
    the claimed bound and at :data:`WIDE_M`. ``inputs`` maps the convention's data dict to
    the program's own (a pieces fit program's reserved names, ``PiecesModel.fit_inputs``: the
    tests of dpsynth's own assembly). Raises InputError(``stan_file``) naming the first failed
    check.
    """
    program = _Evaluator(stan_file, backend, inputs or dict)
    data, M = dict(data), float(censor_bound)
    n = int(data["n"])
    y = np.asarray(data["y"])
    rng = np.random.default_rng(secrets.randbits(128))
    changes = _changes(y, records, values, subsets, rng, outcome)
    full = dict(data, want_contrib=1, want_rep=0)
    zero = dict(full, alpha=np.zeros(n))
    t0 = program.density(zero, params)
    variants = [
        (
            "the outcome replaced by placeholders",
            dict(zero, y=_mixed_placeholder(n, values, y.dtype, rng)),
        )
    ]
    variants += [(label, dict(zero, y=new)) for label, where, new in changes if where.size == 1]
    if neighbours == "add-remove" and n > 1:
        variants.append(("a record removed", _without_last(zero)))
    for what, changed in variants:
        moved = program.density(changed, params) - t0
        if not np.all(np.abs(moved) <= PRIOR_ATOL):
            raise _refuse("prior", f"the alpha = 0 target moves with {what}")
    # the claimed bound, then a bound so wide that (almost) no term is clamped: a term that
    # breaks locality or the sum can hide behind the clamp at M (all records clamped at
    # these draws) and still show where the clamp is inactive
    for bound in (M, max(WIDE_M, M)):
        at_bound = dict(full, M=bound)
        contrib = _contributions(program, at_bound, params, bound)
        _check_sum(program, at_bound, params, t0, contrib)
        for label, where, new in changes:
            changed = dict(at_bound, y=new)
            alt = _contributions(program, changed, params, bound)
            others = np.ones(n, dtype=bool)
            others[where] = False
            if not np.allclose(alt[:, others], contrib[:, others], rtol=1e-9, atol=1e-12):
                raise _refuse("locality", f"with {label}, other records' contrib changed")
            if where.size == 1:  # the random halves test locality only (they are many)
                _check_sum(program, changed, params, t0, alt)


def _without_last(data: Mapping[str, Any]) -> dict[str, Any]:
    """The data with the last record removed (add-remove neighbours: n is not public)."""
    n = int(data["n"])
    out = dict(data, n=n - 1)
    for key, value in data.items():
        if np.ndim(value) >= 1 and np.shape(value)[0] == n:
            out[key] = np.asarray(value)[: n - 1]
    return out


class _Evaluator(NamedTuple):
    """A program evaluated at fixed parameters, its data mapped by ``inputs`` first."""

    stan_file: str | Path
    backend: str | None
    inputs: Callable[[Mapping[str, Any]], dict[str, Any]]

    def density(self, data: Mapping[str, Any], params: list) -> np.ndarray:
        return log_density(self.stan_file, self.inputs(data), params, backend=self.backend)

    def outputs(self, data: Mapping[str, Any], params: list) -> list[dict[str, np.ndarray]]:
        return outputs_at(self.stan_file, self.inputs(data), params, backend=self.backend)


def _contributions(program: _Evaluator, data, params, M) -> np.ndarray:
    outs = program.outputs(data, params)
    n = int(data["n"])
    contrib = [np.asarray(o.get("contrib", ()), dtype=float).ravel() for o in outs]
    if any(c.shape != (n,) for c in contrib):
        raise InputError(
            "stan_file", "the program does not write `contrib` (one value per record per draw)"
        )
    contrib = np.vstack(contrib)
    if not np.all(np.isfinite(contrib)) or float(np.max(np.abs(contrib))) > M * (1 + 1e-9):
        raise _refuse("clamp", "some contributions are not clamped to [-M, M]")
    return contrib


def _check_sum(program: _Evaluator, data, params, t0, contrib) -> None:
    target = program.density(data, params)
    expected = contrib.sum(axis=1)
    scale = 1 + np.abs(contrib).sum(axis=1)
    if not np.all(np.abs(target - t0 - expected) <= RTOL * scale):
        raise _refuse("sum", "the target is not its prior plus the sum of its contributions")


CONVENTION_DATA = ("n", "alpha", "censor", "M", "want_contrib", "want_rep", "y")
"""Data every program of the convention declares (book: "Bringing your own Stan model")."""
OPTIONAL_DATA = ("K", "X", "centre")
"""Data dpsynth also supplies: the design of a covariate model, the record centres."""
CONVENTION_OUTPUTS = ("contrib", "contrib_uncensored", "record_log_lik", "y_rep")
"""Generated quantities every program of the convention declares."""


def check_convention(stan_file: str | Path) -> None:
    """Raise InputError(``stan_file``) unless the program declares the convention's names.

    A static check of the program text, before anything is compiled or sampled: the
    data block declares the data dpsynth supplies (:data:`CONVENTION_DATA`, and
    :data:`OPTIONAL_DATA` if it uses them) and nothing else, and the generated
    quantities declare :data:`CONVENTION_OUTPUTS`. Without it a program that needs other data would fail
    inside Stan naming its own variable rather than the program.
    """
    blocks = program_blocks(engine.program_code(stan_file))
    if "data" not in blocks:
        raise InputError("stan_file", "the program has no data block (see the Stan convention)")
    data = declared_names(blocks["data"])
    missing = [v for v in CONVENTION_DATA if v not in data]
    extra = [v for v in data if v not in CONVENTION_DATA + OPTIONAL_DATA]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"does not declare the data {', '.join(missing)}")
        if extra:
            parts.append(f"declares data dpsynth cannot supply ({', '.join(extra)})")
        raise InputError(
            "stan_file",
            f"the program {' and '.join(parts)}; the data of the convention are "
            f"{', '.join(CONVENTION_DATA)} (optionally {', '.join(OPTIONAL_DATA)})",
        )
    if re.search(r"\b\w+_rng\s*\(", blocks.get("transformed data", "")):
        raise InputError(
            "stan_file",
            "the program draws random numbers in its transformed data, which would let it "
            "tell dpsynth's check evaluations (fixed seeds) from the fit; draw them elsewhere",
        )
    outputs = declared_names(blocks.get("generated quantities", ""))
    missing_out = [v for v in CONVENTION_OUTPUTS if v not in outputs]
    if missing_out:
        raise InputError(
            "stan_file",
            f"the program's generated quantities do not declare {', '.join(missing_out)} "
            "(see the Stan convention)",
        )


def program_blocks(code: str) -> dict[str, str]:
    """The top-level blocks of a Stan program, ``{"data": body, ...}``, comments removed."""
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.DOTALL)
    code = re.sub(r"//[^\n]*", " ", code)
    blocks: dict[str, str] = {}
    depth, header, start = 0, [], 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                name, header, start = " ".join("".join(header).split()), [], i + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                blocks[name] = code[start:i]
        elif depth == 0:
            header.append(ch)
    return blocks


def declared_names(body: str) -> list[str]:
    """Variables declared by the top-level statements of a block body (nested bodies skipped)."""
    top, level = [], 0
    for ch in body:
        if ch == "{":
            level += 1
        elif ch == "}":
            level -= 1
            if level == 0:
                top.append(";")
        elif level == 0:
            top.append(ch)
    names = []
    for stmt in "".join(top).split(";"):
        while re.search(r"<[^<>]*>", stmt):  # constraints such as <lower=0, upper=1>
            stmt = re.sub(r"<[^<>]*>", " ", stmt)
        while re.search(r"\[[^\[\]]*\]", stmt):  # sizes such as [n] or [want_rep ? n : 0]
            stmt = re.sub(r"\[[^\[\]]*\]", " ", stmt)
        words = stmt.split("=")[0].split()
        if len(words) >= 2 and re.fullmatch(r"[A-Za-z]\w*", words[-1]):
            names.append(words[-1])
    return names
