"""The one place where synthetic records are made: from posterior draws and public inputs only.

Invariant (what an auditor checks here, and ``tests/test_synthesis.py`` checks structurally):
every function of this module takes parameter draws (theta) and public inputs -- the
covariates ``X`` and design size ``K``, the number of records ``n``, the public bounds, the
censoring bound ``M``, seeds and counts -- and never the confidential outcome ``y``, the
weights ``alpha`` or the record centres ``centre`` (functions of the data or of a fit to
them). :func:`public_only` is the gate: it drops :data:`CONFIDENTIAL_INPUTS` from a fit's
data dict, and every step below sees only what it returns.

Records come out of one of two generators (the posterior predictive, synthesis as
post-processing of one retained draw, Eq. 2.3's pseudo posterior in the vector-weighted
paper, Eq. 3.6 in the censoring paper):

* a shipped or pieces model's ``Model.simulate(draw, public, n_out, rng)``: the numpy
  mirror of the program's ``y_rep`` (:mod:`dpsynth.models.catalogue`), or a pieces model's synthesis
  program, which declares public inputs only (:func:`pieces_y_rep`);
* a whole user program's own generated quantities, run by Stan's fixed-parameter sampler
  at one draw on :func:`public_data` (the outcome replaced by a public placeholder).

Then the records go back to the outcome's scale and are clipped to the public bounds
(:func:`to_original_scale`). Which draws are used is fixed by the seed alone
(:func:`published_picks`, :func:`verdict_picks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dpsynth import engine
from dpsynth.errors import InputError
from dpsynth.models.catalogue import Model, clip_to_public_bounds, design_matrix

CONFIDENTIAL_INPUTS = ("y", "alpha", "centre")
"""Entries of the convention's data dict that hold (or derive from) confidential data."""

PLACEHOLDERS: dict[str, tuple[float, ...]] = {
    "unit": (0.5, 0.25, 0.75),
    "count": (0, 1, 3),
    "positive": (1.0, 0.5, 2.0),
    "real": (1.0, 0.5, 2.0, 0.0, -1.0),
}
"""Public stand-ins for the outcome, per outcome type, tried in order (on the Stan scale)."""

Draws = Mapping[str, np.ndarray]
"""Retained draws theta: ``draws[name]`` has shape ``(S, *dims)``."""


def public_only(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` without :data:`CONFIDENTIAL_INPUTS`: what synthesis may read (the gate)."""
    return {k: v for k, v in inputs.items() if k not in CONFIDENTIAL_INPUTS}


def public_data(
    public: Mapping[str, Any], value: float, n_out: int, *, centred: bool | None = None
) -> dict[str, Any]:
    """The Stan data of a synthesis step: every input that may hold confidential data replaced.

    ``y`` becomes ``n_out`` copies of the public placeholder ``value`` (integers for a count
    placeholder); the weights become zeros, and so do the record centres if the program
    declares them (``centred``; None: if ``public`` has a ``centre`` entry); the public
    inputs stay (``M``, ``censor``, the covariates ``X``: a regression keeps
    ``n_out = n``). ``want_contrib = 0``, ``want_rep = 1``. Confidential entries of
    ``public``, if any, are dropped unread.
    """
    if "X" in public and n_out != int(public["n"]):
        raise InputError("n_synthetic", "a regression synthesizes one record per covariate row")
    centred = "centre" in public if centred is None else centred
    out = dict(public_only(public), n=n_out, alpha=np.zeros(n_out), want_contrib=0, want_rep=1)
    out["y"] = np.full(n_out, value, dtype=int if _is_int(value) else float)
    if centred:
        out["centre"] = np.zeros(n_out)
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def placeholder(
    model: Model, public: Mapping[str, Any], draw: Mapping[str, Any], backend: str | None
) -> float:
    """The first public placeholder outcome (:data:`PLACEHOLDERS`) the program accepts.

    Tried at one draw: a value the program's declared constraints on ``y`` reject, or at
    which its target (weights zero) is not finite, is skipped. Raises
    InputError(``stan_file``) if none fits.
    """
    values = PLACEHOLDERS.get(model.outcome, PLACEHOLDERS["real"])
    for value in values:
        stand_in = public_data(public, value, int(public["n"]), centred=model.centred)
        try:
            engine.outputs_at(model.stan_file, stand_in, [draw], backend=backend)
            target = engine.log_density(model.stan_file, stand_in, [draw], backend=backend)
        except InputError as exc:
            if exc.param in ("y", "data"):
                continue
            raise
        if np.all(np.isfinite(target)):
            return value
    raise InputError(
        "stan_file",
        "the program's declared constraints on y reject every public placeholder "
        f"({', '.join(map(str, PLACEHOLDERS.get(model.outcome, ())))}) used to run "
        "its generated quantities without the confidential data",
    )


def derived_seed(seed: int, tag: str) -> int:
    """A seed in [0, 2^31 - 1) for the step named ``tag``, fixed by ``seed`` alone."""
    digest = np.random.SeedSequence([seed, *map(ord, tag)]).generate_state(1)[0]
    return int(digest % (2**31 - 1))


def published_picks(seed: int, S: int, m: int) -> tuple[np.ndarray, np.random.Generator]:
    """The m distinct retained draws (of S) the published sets come from, and the generator
    that then simulates them (fixed by the seed)."""
    rng = np.random.default_rng([seed % (2**63), 1])
    return rng.choice(S, size=m, replace=False), rng


def published_draws(
    draws: Draws, n_draws: int, seed: int, m: int
) -> tuple[tuple[dict[str, Any], ...], np.random.Generator]:
    """The m retained draws a release's published sets come from (:func:`published_picks`),
    each as ``{name: value}``, and the generator that then simulates them: all that a draw
    at a new public design needs of a fit (a table column's, :mod:`dpsynth.table.columns`)."""
    picks, rng = published_picks(seed, n_draws, m)
    return tuple({k: v[int(s)] for k, v in draws.items()} for s in picks), rng


DRAW_ROWS = 200_000
"""A whole table's set is drawn from its public design at most this many rows at a time: the
draw's steps read the design at :func:`step_rows` (every row of a table this size or
smaller, else a public random this many), and its values are simulated a chunk of rows at a
time, so a set's design never holds more rows than this, however large the table (its
memory: book, Scale). A table of at most this many records is drawn as one chunk; a larger
table is drawn as a pilot of this many rows, then a partition
(``dpsynth.formats.PARTITION_RECORDS``, fewer) at a time
(``dpsynth.table.published.PartitionDraw``)."""


class RowDesign(Protocol):
    """A set's public design made on demand, some rows at a time (a whole table's,
    :mod:`dpsynth.table.columns`): ``n`` rows; ``at(rows)``, the design (no intercept column,
    a :class:`~dpsynth.models.catalogue.PublicDesign`) at ``rows`` (a slice or positions)."""

    n: int

    def at(self, rows: slice | np.ndarray) -> np.ndarray: ...


def step_rows(n: int) -> slice | np.ndarray:
    """The rows of an n-row design a draw's steps read: all of them up to :data:`DRAW_ROWS`,
    else that many positions drawn with a generator seeded by n alone (public, in order)."""
    if n <= DRAW_ROWS:
        return slice(None)
    return np.sort(np.random.default_rng(n).choice(n, DRAW_ROWS, replace=False))


def sets_at_designs(
    model: Model,
    draws: Sequence[Mapping[str, Any]],
    rng: np.random.Generator,
    designs: Iterable[np.ndarray | RowDesign | None],
    bounds: tuple[float, float] | None,
    steps: Sequence[Any] = (),
) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
    """Set k from ``draws[k]`` at the public design ``designs[k]`` (no intercept column;
    :func:`dpsynth.models.catalogue.design_matrix` adds it; a :class:`RowDesign` is made
    :data:`DRAW_ROWS` rows at a time): each step of ``steps`` (a callable ``(draw, design
    matrix, k) -> draw``, post-processing) applied to the draw in turn, then
    ``model.simulate`` with ``rng``, back on the outcome's scale inside the public bounds.
    Records come from the draw and public inputs only. Returns the sets and each set's draw
    after its steps (what a later draw of the same set at another public design simulates
    from: :func:`set_at`)."""
    out, stepped = [], []
    for k, (draw, X) in enumerate(zip(draws, designs, strict=True)):
        if hasattr(X, "at"):
            y, draw = _set_by_rows(model, draw, rng, X, steps, k)
        else:
            Xd = design_matrix(0 if X is None else X.shape[0], X)
            for step in steps:
                draw = step(draw, Xd, k)
            y = _simulated(model, draw, Xd, rng)
            del Xd
        out.append(to_original_scale(model, y, bounds))
        stepped.append(dict(draw))
        del X  # before the next set's design is made (``designs`` may make them lazily)
    return out, stepped


def set_at(
    model: Model,
    draw: Mapping[str, Any],
    rng: np.random.Generator,
    X: np.ndarray,
    bounds: tuple[float, float] | None,
) -> np.ndarray:
    """Records from a set's draw after its steps (:func:`sets_at_designs`) at the
    public design ``X`` (no intercept column), on the outcome's scale inside the bounds: a
    partition of a set drawn at the steps its pilot took."""
    return to_original_scale(
        model, _simulated(model, draw, design_matrix(X.shape[0], X), rng), bounds
    )


def _set_by_rows(
    model: Model,
    draw: Mapping[str, Any],
    rng: np.random.Generator,
    design: RowDesign,
    steps: Sequence[Any],
    k: int,
) -> tuple[np.ndarray, Mapping[str, Any]]:
    """Set k's values from ``draw`` at a :class:`RowDesign`: the steps at its
    :func:`step_rows`, then the values :data:`DRAW_ROWS` rows at a time (one chunk, the same
    arrays and generator calls as a whole design, where it has at most that many rows); and
    the draw after the steps."""
    X = design.at(step_rows(design.n))
    Xd = design_matrix(X.shape[0], X)
    for step in steps:
        draw = step(draw, Xd, k)
    if design.n <= DRAW_ROWS:
        return _simulated(model, draw, Xd, rng), draw
    del X, Xd
    parts = []
    for start in range(0, design.n, DRAW_ROWS):
        Xc = design.at(slice(start, min(start + DRAW_ROWS, design.n)))
        parts.append(_simulated(model, draw, design_matrix(Xc.shape[0], Xc), rng))
    return np.concatenate(parts), draw


def _simulated(
    model: Model, draw: Mapping[str, Any], Xd: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """``model.simulate`` at ``draw`` on the design matrix ``Xd`` (intercept first)."""
    n = Xd.shape[0]
    return np.asarray(model.simulate(draw, {"n": n, "K": Xd.shape[1], "X": Xd}, n, rng), float)


def verdict_picks(seed: int, S: int, m: int, extra: int) -> tuple[np.ndarray, np.random.Generator]:
    """Up to ``extra`` retained draws other than the m published ones (curator's use only),
    and the generator that then simulates them (fixed by the seed)."""
    published, _ = published_picks(seed, S, m)
    rng = np.random.default_rng([seed % (2**63), 2])
    others = np.setdiff1d(np.arange(S), published)
    return rng.choice(others, size=min(extra, others.size), replace=False), rng


def sets_at(
    model: Model,
    draws: Draws,
    public: Mapping[str, Any],
    picks: Sequence[int] | np.ndarray,
    n_out: int,
    rng: np.random.Generator,
    *,
    bounds: tuple[float, float] | None,
    seed: int,
    param_names: Sequence[str] = (),
    stand_in: float | None = None,
    backend: str | None = None,
    quiet: bool = True,
) -> np.ndarray:
    """One synthetic set per retained draw in ``picks`` (len(picks) x n_out), original scale.

    Posterior predictive at each picked draw: ``model.simulate`` with ``rng``, else the
    program's ``y_rep`` (:func:`stan_y_rep` at the parameters block ``param_names``, the
    public ``stand_in`` outcome, seeded by ``derived_seed(seed, "rep-j")`` for the j-th
    pick); then :func:`to_original_scale`.
    """
    public = public_only(public)
    sets = []
    for j, s in enumerate(picks):
        draw = {k: v[int(s)] for k, v in draws.items()}
        if model.simulate is not None:
            y_rep = model.simulate(draw, public, n_out, rng)
        else:
            if stand_in is None:
                raise InputError(
                    "stand_in", "a user program's synthesis needs a public placeholder"
                )
            params = parameter_values(draw, param_names)
            stan_seed = derived_seed(seed, f"rep-{j}")
            y_rep = stan_y_rep(model, params, public, stand_in, n_out, stan_seed, backend, quiet)
        sets.append(to_original_scale(model, np.asarray(y_rep, dtype=float), bounds))
    return np.vstack(sets)


def parameter_values(draw: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """One draw's values of the parameters block ``names`` as plain numbers and lists."""
    out = {}
    for k, v in draw.items():
        if k in names:
            v = np.asarray(v)
            out[k] = v.tolist() if v.ndim else float(v)
    return out


def stan_y_rep(
    model: Model,
    draw: Mapping[str, Any],
    public: Mapping[str, Any],
    value: float,
    n_out: int,
    seed: int,
    backend: str | None = None,
    quiet: bool = True,
) -> np.ndarray:
    """Stan's ``y_rep`` at one draw, from the draw and public inputs only.

    The program's generated quantities run on :func:`public_data` (the outcome replaced by
    the public placeholder ``value``, zero weights and centres, ``n_out`` records), never on
    the data of the fit: whatever a user program writes into ``y_rep``, no confidential
    value can reach the synthetic set. ``draw`` holds the parameters block's values.
    """
    y_rep = engine.generate(
        model.stan_file,
        public_data(public, value, n_out, centred=model.centred),
        draw,
        seed=seed,
        backend=backend,
        quiet=quiet,
    )
    return np.asarray(y_rep, dtype=float)[:n_out]


def pieces_inputs(public: Mapping[str, Any], n_out: int) -> dict[str, Any]:
    """A pieces synthesis program's data: ``n_out`` records and their public covariate rows.

    Reads only ``K`` and ``X``; an intercept-only design (K = 1) gives ``n_out`` rows of 1,
    any other design must have ``n_out`` rows (a regression synthesizes one record per
    covariate row).
    """
    K, X = int(public["K"]), np.asarray(public["X"], dtype=float)
    if X.shape[0] != n_out:
        if K != 1:
            raise InputError("n_synthetic", "a regression synthesizes one record per covariate row")
        X = np.ones((n_out, 1))
    return {"n": int(n_out), "K": K, "X": X}


def pieces_y_rep(
    stan_file: str | Path,
    parameter_names: Sequence[str],
    draw: Mapping[str, Any],
    public: Mapping[str, Any],
    n_out: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``y_rep`` of a pieces model's synthesis program at one draw (``Model.simulate``).

    The program (:func:`dpsynth.models.pieces.synthesis_program`) declares public inputs only and
    draws each record by the user's ``record_rng``; it is run by Stan's fixed-parameter
    sampler on :func:`pieces_inputs` and the draw's ``parameter_names``, seeded from ``rng``.
    """
    params = {k: np.asarray(draw[k]).tolist() for k in parameter_names}
    seed = int(rng.integers(2**31 - 1))
    y_rep = engine.generate(stan_file, pieces_inputs(public, n_out), params, seed=seed)
    return np.asarray(y_rep, dtype=float)[:n_out]


def to_original_scale(
    model: Model, records: np.ndarray, bounds: tuple[float, float] | None
) -> np.ndarray:
    """Synthetic records on the outcome's scale (:meth:`Model.from_stan_scale`), always inside
    the public ``bounds`` (clipped: post-processing)."""
    out = np.asarray(model.from_stan_scale(records, bounds), dtype=float)
    return clip_to_public_bounds(out, bounds)
