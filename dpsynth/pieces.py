"""A user's model as pieces, assembled by dpsynth into programs that are private by construction.

The user writes only (``book/stan_convention.md``, "Bring your own model as pieces"):

* ``parameters { ... }`` (and optionally ``transformed parameters { ... }``): their
  constraints and sizes may use public data only;
* ``prior { ... }``: model statements of the prior;
* ``functions { ... }`` with ``record_lpdf(real y | row_vector x, <params>)`` (or
  ``record_lpmf(int y | ...)`` for counts), the log density of ONE record from its outcome,
  its public covariate row and the parameters (parameters, then transformed parameters,
  in declaration order), and ``record_rng(row_vector x, <params>)`` drawing one record.

dpsynth writes everything else, in three programs:

* the **scope program**: the pieces compiled (by stanc only) in a program whose data block
  declares public data only (``K``; under substitution also ``n`` and ``X``). A reference
  to anything confidential is a compile error there, refused naming the piece;
* the **fit program**: confidential data under reserved names (``dpsynth_y``,
  ``dpsynth_alpha``, ...; no user identifier may start with ``dpsynth_``), the loop calling
  the record function once per record with that record's outcome and covariate row alone,
  the clamp and the sum by ``dpsynth_centred_target`` (``stan/dpsynth_functions.stan``), and
  the generated quantities the :class:`~dpsynth.mechanisms.Synthesizer` reads;
* the **synthesis program**: public inputs and the number of records only, the user's
  parameters, and ``y_rep`` from ``record_rng`` per record, run at a posterior draw with
  Stan's fixed-parameter sampler. It never holds the outcome.

The one premise the construction cannot give is that the record function is total (a Stan
exception inside it rejects the proposal: an unclamped ``-inf`` term).
:func:`public_precheck` evaluates it on a public grid of outcomes at prior draws, before
any confidential data are read; :func:`record_exceptions` counts the exceptions that came
through the record loop in the confidential fit itself, and a release where it raised is
refused; the book states the residual.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpsynth import engine, synthesis
from dpsynth.engine.common import write_atomically
from dpsynth.errors import InputError
from dpsynth.models import Draws, Model

ALLOWED_BLOCKS = ("functions", "parameters", "transformed parameters", "prior")
"""The pieces a user writes; any other block (data, transformed data, model, ...) is refused."""
REQUIRED_BLOCKS = ("functions", "parameters", "prior")
FORBIDDEN_CALLS = ("print", "reject", "fatal_error")
"""Statements that could carry a value out of a fit (to a terminal or an error message)."""
RESERVED_PREFIX = "dpsynth_"
"""Prefix of every name dpsynth gives confidential data; refused in the user's pieces."""
GRID_REAL = (-1e6, -1e3, -100.0, -10.0, -3.0, -1.0, -0.1, 0.0, 0.1, 1.0, 3.0, 10.0, 100.0, 1e3, 1e6)
"""Public outcomes at which the record function must evaluate (real outcomes, no bounds)."""
GRID_COUNT = (0, 1, 2, 3, 5, 10, 30, 100, 1000, 100000)
"""Public outcomes at which the record function must evaluate (counts)."""
GRID_POINTS = 21
"""Outcomes evaluated between public bounds (inclusive), when bounds are given."""
PRIOR_DRAWS = 8
"""Prior draws at which the record function is evaluated (:func:`public_precheck`)."""
PRIOR_SAMPLER = {"chains": 1, "iter_warmup": 300, "iter_sampling": 200}
"""The short NUTS run of the prior (likelihood switched off, public inputs only)."""
COVARIATE_ROWS = 10
"""Distinct public covariate rows at which the record function is evaluated."""


@dataclass(frozen=True)
class Pieces:
    """A parsed pieces file: the four blocks, the outcome type and the parameter names.

    ``arguments`` are the names passed to the record functions after the outcome and the
    covariate row: the parameters, then the transformed parameters, in declaration order.
    ``outcome`` is ``"real"`` (``record_lpdf``) or ``"count"`` (``record_lpmf``).
    """

    functions: str
    parameters: str
    transformed_parameters: str
    prior: str
    outcome: str
    parameter_names: tuple[str, ...]
    arguments: tuple[str, ...]
    source: str = "pieces"

    @property
    def density(self) -> str:
        """The record function's name: ``record_lpdf`` or ``record_lpmf``."""
        return "record_lpmf" if self.outcome == "count" else "record_lpdf"


def _refuse(piece: str, message: str) -> InputError:
    """A refusal naming the piece (``InputError("pieces", "pieces: <piece> ...")``)."""
    return InputError("pieces", f"{piece} {message}")


def _strip_comments(code: str) -> str:
    """Stan code without ``/* */`` and ``//`` comments (newlines kept, so lines still count)."""
    code = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), code, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", code)


def parse_pieces(text: str, source: str = "pieces") -> Pieces:
    """Parse and statically check a pieces file (the format of the module docstring).

    Refuses, naming the piece: blocks other than :data:`ALLOWED_BLOCKS`, ``print``,
    ``reject``, ``fatal_error``, ``#include``, ``_lp`` function definitions, ``target``
    in the functions, identifiers starting with :data:`RESERVED_PREFIX`, and a missing
    record function. Name resolution is checked later by stanc (:func:`check_scope`).
    """
    from dpsynth.program_checks import declared_names, program_blocks

    code = _strip_comments(text)
    if re.search(r"#\s*include", code):
        raise _refuse("the file", "uses #include; write every function in the functions block")
    blocks = program_blocks(code)
    for name in blocks:
        if name not in ALLOWED_BLOCKS:
            raise _refuse(
                f"block '{name}'",
                f"is not a piece: write only {', '.join(ALLOWED_BLOCKS)} (dpsynth writes the "
                "data, the likelihood and the synthesis)",
            )
    for name in REQUIRED_BLOCKS:
        if name not in blocks:
            raise _refuse("the file", f"has no '{name}' block")
    for name, body in blocks.items():
        _check_body(name, body)
    functions = blocks["functions"]
    if re.search(r"\b\w+_lp\s*\(", functions):
        raise _refuse("functions", "define a _lp function; only the prior block may add to target")
    if re.search(r"\btarget\b", functions):
        raise _refuse("functions", "refer to target; a record function returns its log density")
    has_pdf = re.search(r"\brecord_lpdf\s*\(", functions) is not None
    has_pmf = re.search(r"\brecord_lpmf\s*\(", functions) is not None
    if has_pdf == has_pmf:
        raise _refuse("functions", "must define exactly one of record_lpdf and record_lpmf")
    if not re.search(r"\brecord_rng\s*\(", functions):
        raise _refuse("functions", "must define record_rng(row_vector x, <params>)")
    params = tuple(declared_names(blocks["parameters"]))
    tparams = tuple(declared_names(blocks.get("transformed parameters", "")))
    if not params:
        raise _refuse("parameters", "declare no parameter")
    return Pieces(
        functions,
        blocks["parameters"],
        blocks.get("transformed parameters", ""),
        blocks["prior"],
        "count" if has_pmf else "real",
        params,
        params + tparams,
        source,
    )


def _check_body(piece: str, body: str) -> None:
    """Refuse forbidden statements and reserved names in one piece."""
    for call in FORBIDDEN_CALLS:
        if re.search(rf"\b{call}\s*\(", body):
            raise _refuse(
                piece,
                f"calls {call}(), which could carry a confidential value to a terminal or an "
                "error message; pieces may not print or raise",
            )
    reserved = re.search(rf"\b{RESERVED_PREFIX}\w*", body)
    if reserved:
        raise _refuse(
            piece,
            f"uses the name {reserved.group(0)}: names starting with {RESERVED_PREFIX} "
            "are dpsynth's",
        )


def read_pieces(path: str | Path) -> Pieces:
    """Read and parse a pieces file; InputError(``pieces``) if it is missing or malformed."""
    p = Path(path)
    if not p.is_file():
        raise InputError("pieces", f"no such file: {p}")
    return parse_pieces(p.read_text(), source=p.stem)


# --- assembly -------------------------------------------------------------------------


class _Program:
    """A Stan program built block by block, remembering which piece each line came from."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.owner: list[str] = []

    def add(self, text: str, owner: str = "dpsynth") -> None:
        for line in text.strip("\n").split("\n"):
            self.lines.append(line)
            self.owner.append(owner)

    def block(self, header: str, body: str, owner: str) -> None:
        self.add(header + " {")
        self.add(body, owner)
        self.add("}")

    @property
    def code(self) -> str:
        return "\n".join(self.lines) + "\n"

    def piece_at(self, line: int) -> str:
        """The piece that wrote 1-based ``line`` (``dpsynth`` for assembled code)."""
        return self.owner[line - 1] if 0 < line <= len(self.owner) else "dpsynth"

    def expanded(self) -> _Program:
        """The same program with ``#include`` lines replaced by the shared functions file
        (what stanc sees), each line still attributed to its piece."""
        out = _Program()
        for line, owner in zip(self.lines, self.owner, strict=True):
            if line.strip() == f"#include {engine.SHARED_FUNCTIONS}":
                out.add((engine.STAN_DIR / engine.SHARED_FUNCTIONS).read_text(), "dpsynth")
            else:
                out.lines.append(line)
                out.owner.append(owner)
        return out


def _args(pieces: Pieces) -> str:
    return ", ".join(pieces.arguments)


def _user_blocks(program: _Program, pieces: Pieces) -> None:
    """The parameters and transformed parameters, as written (same text in every program)."""
    program.block("parameters", pieces.parameters, "parameters")
    if pieces.transformed_parameters.strip():
        program.block(
            "transformed parameters", pieces.transformed_parameters, "transformed parameters"
        )


PUBLIC_DATA = {
    "substitution": "  int<lower=0> n;\n  int<lower=1> K;\n  matrix[n, K] X;",
    "add-remove": "  int<lower=1> K;",
}
"""The data block of the scope program: public data only, per neighbour relation (n is
private under add-remove, and a regression is refused there, so only K is public)."""


def scope_program(pieces: Pieces, neighbours: str) -> _Program:
    """The pieces in a program whose data block holds public data only (:data:`PUBLIC_DATA`).

    Its generated quantities call both record functions once (with placeholder arguments),
    so stanc also checks their signatures. Only ever type-checked, never run.
    """
    p = _Program()
    p.block("functions", pieces.functions, "functions")
    p.block("data", PUBLIC_DATA[neighbours], "dpsynth")
    _user_blocks(p, pieces)
    p.block("model", pieces.prior, "prior")
    zero = "0" if pieces.outcome == "count" else "0.0"
    kind = "int" if pieces.outcome == "count" else "real"
    p.block(
        "generated quantities",
        f"  real dpsynth_check_density = {pieces.density}({zero} | rep_row_vector(1, K), "
        f"{_args(pieces)});\n"
        f"  {kind} dpsynth_check_rng = record_rng(rep_row_vector(1, K), {_args(pieces)});",
        "record functions",
    )
    return p


def fit_program(pieces: Pieces) -> str:
    """The fit program's text (:func:`_fit_program`)."""
    return _fit_program(pieces).code


def _fit_program(pieces: Pieces) -> _Program:
    """The fit program: dpsynth's data, loop, clamp and sum around the user's pieces.

    Each record's term is the record function at that record's outcome and covariate row
    alone; ``dpsynth_centred_target`` weights, centres and clamps the terms to [-M, M] and
    sums them (Hu, Williams & Savitsky, Eq. 3.5; ``stan/dpsynth_functions.stan``). With
    ``dpsynth_prior_only = 1`` the likelihood is off (prior draws, on public inputs).
    """
    kind = "int" if pieces.outcome == "count" else "real"
    call = f"{pieces.density}(dpsynth_y[dpsynth_i] | X[dpsynth_i], {_args(pieces)})"
    probe = f"{pieces.density}(dpsynth_probe_y | dpsynth_probe_X[dpsynth_u], {_args(pieces)})"
    p = _Program()
    p.block("functions", "#include dpsynth_functions.stan\n" + pieces.functions, "functions")
    p.block("data", _FIT_DATA.format(kind=kind), "dpsynth")
    _user_blocks(p, pieces)
    p.block(
        "model",
        "  {\n" + pieces.prior + "\n  }\n" + _FIT_MODEL.format(call=call, probe=probe),
        "prior",
    )
    p.block("generated quantities", _FIT_OUTPUTS.format(call=call), "dpsynth")
    return p


_FIT_DATA = """
  int<lower=0> n;
  int<lower=1> K;
  matrix[n, K] X;
  array[n] {kind} dpsynth_y;
  vector<lower=0, upper=1>[n] dpsynth_alpha;
  vector[n] dpsynth_centre;
  int<lower=0, upper=1> dpsynth_censor;
  real<lower=0> dpsynth_M;
  int<lower=0, upper=1> dpsynth_want_contrib;
  int<lower=0, upper=1> dpsynth_prior_only;
  {kind} dpsynth_probe_y;
  int<lower=0> dpsynth_n_probe;
  matrix[dpsynth_n_probe, K] dpsynth_probe_X;
"""

_FIT_MODEL = """
  if (dpsynth_prior_only == 0) {{
    vector[n] dpsynth_ll;
    // a public outcome at every distinct public covariate row first: an exception here
    // depends on public inputs only
    for (dpsynth_u in 1:dpsynth_n_probe) {{
      real dpsynth_probe = {probe};
    }}
    for (dpsynth_i in 1:n) {{
      dpsynth_ll[dpsynth_i] = {call};
    }}
    target += dpsynth_centred_target(dpsynth_ll, dpsynth_centre, dpsynth_alpha,
                                     dpsynth_censor, dpsynth_M);
  }}
"""

_FIT_OUTPUTS = """
  vector[dpsynth_want_contrib ? n : 0] contrib;
  vector[dpsynth_want_contrib ? n : 0] contrib_uncensored;
  vector[dpsynth_want_contrib ? n : 0] record_log_lik;
  if (dpsynth_want_contrib == 1) {{
    for (dpsynth_i in 1:n) {{
      record_log_lik[dpsynth_i] = {call};
    }}
    contrib = dpsynth_centred_contrib(record_log_lik, dpsynth_centre, dpsynth_alpha,
                                      dpsynth_censor, dpsynth_M);
    contrib_uncensored = dpsynth_alpha .* (record_log_lik - dpsynth_centre);
  }}
"""


def synthesis_program(pieces: Pieces) -> str:
    """The synthesis program's text (:func:`_synthesis_program`)."""
    return _synthesis_program(pieces).code


def _synthesis_program(pieces: Pieces) -> _Program:
    """The synthesis program: public inputs and ``n`` only; ``y_rep`` from ``record_rng``.

    No outcome, weight or centre is declared, so nothing confidential can reach ``y_rep``;
    run by Stan's fixed-parameter sampler at one posterior draw (:func:`dpsynth.engine.generate`).
    """
    kind = "int" if pieces.outcome == "count" else "real"
    p = _Program()
    p.block("functions", pieces.functions, "functions")
    p.block("data", PUBLIC_DATA["substitution"], "dpsynth")
    _user_blocks(p, pieces)
    p.block(
        "generated quantities",
        f"  array[n] {kind} y_rep;\n  for (dpsynth_i in 1:n) {{\n"
        f"    y_rep[dpsynth_i] = record_rng(X[dpsynth_i], {_args(pieces)});\n  }}",
        "dpsynth",
    )
    return p


_NOT_IN_SCOPE = re.compile(r"Identifier '(\w+)' not in scope")
_LINE = re.compile(r"line (\d+), column")


def check_scope(pieces: Pieces, neighbours: str = "substitution") -> None:
    """Compile (stanc only) the pieces in the public scope; refuse in one line naming the piece.

    The proof obligation "prior independent of the data": the scope program declares public
    data only (:data:`PUBLIC_DATA`), so a piece that names the outcome, the weights, the
    centres or the bound (or ``n`` under add-remove) does not compile.
    """
    _compiles(scope_program(pieces, neighbours), pieces, neighbours)


def _compiles(program: _Program, pieces: Pieces, neighbours: str) -> None:
    """Type-check ``program`` with stanc; refuse in one line naming the piece at fault."""
    program = program.expanded()
    error = engine.stanc_errors(program.code)
    if error is None:
        return
    line = _LINE.search(error)
    piece = program.piece_at(int(line.group(1))) if line else "the pieces"
    missing = _NOT_IN_SCOPE.search(error)
    if missing:
        public = "public data (K)" if neighbours == "add-remove" else "public data (n, K, X)"
        raise _refuse(
            piece,
            f"refers to a name that is not {public}, a parameter or its own: "
            f"{missing.group(1)} (under {neighbours} neighbours)",
        )
    last = [s.strip() for s in error.strip().splitlines() if s.strip()][-1]
    if piece == "record functions":
        last += (
            f" (the record functions must be {pieces.density}(y | row_vector x, "
            f"{_args(pieces)}) and record_rng(row_vector x, {_args(pieces)}))"
        )
    raise _refuse(piece, f"does not compile: {last}")


def _write_program(code: str, stem: str, kind: str) -> Path:
    """Write an assembled program to ``$DPSYNTH_CACHE_DIR/pieces`` (named by its hash)."""
    root = Path(os.environ.get("DPSYNTH_CACHE_DIR", Path.home() / ".cache" / "dpsynth"))
    folder = root / "pieces"
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(code.encode()).hexdigest()[:16]
    path = folder / f"{stem}_{kind}_{digest}.stan"
    if not path.is_file():
        write_atomically(path, code)
    return path


# --- the model ------------------------------------------------------------------------


def _param_dicts(pieces: Pieces, draws: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """One dict of parameters-block values per row of ``draws`` (what Stan is started at)."""
    S = int(np.shape(draws[pieces.parameter_names[0]])[0])
    out = []
    for s in range(S):
        row = {}
        for name in pieces.parameter_names:
            value = np.asarray(draws[name])[s]
            row[name] = value.tolist() if value.ndim else float(value)
        out.append(row)
    return out


@dataclass(frozen=True)
class _Synthesis:
    """``Model.simulate`` of a pieces model: the synthesis program at one posterior draw
    (:func:`dpsynth.synthesis.pieces_y_rep`, which passes the program the public inputs and
    the draw's parameters, nothing else)."""

    pieces: Pieces
    stan_file: Path

    def __call__(self, draw: Mapping[str, Any], public: Mapping[str, Any], n_out: int, rng: Any):
        names = self.pieces.parameter_names
        return synthesis.pieces_y_rep(self.stan_file, names, draw, public, n_out, rng)


@dataclass(frozen=True)
class _StanMirror:
    """``record_log_lik(draws, data)`` of a pieces model, evaluated by its own fit program
    (likelihood off, generated ``record_log_lik`` on): S x n. Used where dpsynth needs the
    record log-likelihood at other draws than the fit's (reference weights)."""

    pieces: Pieces
    stan_file: Path

    def __call__(self, draws: Draws, data: dict[str, Any]) -> np.ndarray:
        inputs = fit_inputs(dict(data, want_contrib=1), prior_only=True)
        outs = engine.outputs_at(self.stan_file, inputs, _param_dicts(self.pieces, draws))
        return np.vstack([np.asarray(o["record_log_lik"], dtype=float).ravel() for o in outs])


def _bounds_key(bounds: tuple[float, float] | None) -> Any:
    return None if bounds is None else (float(bounds[0]), float(bounds[1]))


def choose_probe(grid: np.ndarray, finite: np.ndarray, outcome: str) -> float | int:
    """The grid outcome at which the record function was finite most often in the public
    pre-check (``finite``: counts per grid point over prior draws and covariate rows), the
    one nearest the grid's middle among ties: a probe that returns -inf without evaluating
    anything (an outcome outside the model's support) would catch nothing."""
    middle = (grid.size - 1) / 2
    best = max(range(grid.size), key=lambda i: (finite[i], -abs(i - middle)))
    return int(grid[best]) if outcome == "count" else float(grid[best])


def probe_outcome(outcome: str, bounds: tuple[float, float] | None) -> float | int:
    """The probe outcome when no public pre-check chose one: the middle of
    :func:`outcome_grid` (:func:`choose_probe` with no counts)."""
    grid = outcome_grid(outcome, bounds)
    return choose_probe(grid, np.zeros(grid.size), outcome)


def fit_inputs(
    data: Mapping[str, Any], prior_only: bool = False, probe: float | int = 0
) -> dict[str, Any]:
    """The fit program's data from the convention's data dict (:func:`dpsynth.models.stan_data`):
    the confidential entries under their reserved ``dpsynth_`` names; ``probe`` is the public
    outcome of :func:`probe_outcome`, evaluated at every distinct row of the public ``X``."""
    X = np.asarray(data["X"], dtype=float).reshape(int(data["n"]), int(data["K"]))
    # at least one row (the intercept row under add-remove), so that whether the probe runs
    # never depends on n
    probe_X = np.unique(X, axis=0) if X.shape[0] else np.ones((1, int(data["K"])))
    return {
        "n": int(data["n"]),
        "K": int(data["K"]),
        "X": X,
        "dpsynth_y": data["y"],
        "dpsynth_alpha": data["alpha"],
        "dpsynth_centre": data["centre"],
        "dpsynth_censor": int(data["censor"]),
        "dpsynth_M": float(data["M"]),
        "dpsynth_want_contrib": int(data["want_contrib"]),
        "dpsynth_prior_only": int(prior_only),
        "dpsynth_probe_y": probe,
        "dpsynth_n_probe": len(probe_X),
        "dpsynth_probe_X": probe_X,
    }


@dataclass(frozen=True)
class PiecesModel(Model):
    """A user's model given as pieces (:class:`Pieces`), assembled by dpsynth.

    ``stan_file`` is the assembled fit program, ``synthesis_file`` the synthesis program;
    ``simulate`` runs the latter. The design always has an intercept column first
    (:func:`dpsynth.models.design_matrix`), so the record functions' ``x`` is
    ``[1, covariates...]`` (``[1]`` without covariates).
    """

    pieces: Pieces | None = None
    synthesis_file: Path | None = None
    probes: dict[Any, float | int] = field(default_factory=dict, compare=False, repr=False)
    """The probe outcome :func:`public_precheck` chose, by public bounds (:func:`choose_probe`)."""

    @property
    def user_program(self) -> bool:
        """False: the program is dpsynth's assembly, not a whole user program."""
        return False

    def fit_inputs(
        self, data: Mapping[str, Any], bounds: tuple[float, float] | None = None
    ) -> dict[str, Any]:
        """The fit program's data (:func:`fit_inputs`), probing at the outcome the public
        pre-check chose for these ``bounds`` (else :func:`probe_outcome`)."""
        probe = self.probes.get(_bounds_key(bounds), probe_outcome(self.outcome, bounds))
        return fit_inputs(data, probe=probe)

    def log_lik_mirror(self) -> _StanMirror:
        """The record log-likelihood at any draws, by the fit program itself."""
        assert self.pieces is not None
        return _StanMirror(self.pieces, self.stan_file)

    def to_stan_scale(self, y: Any, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """As :meth:`dpsynth.models.Model.to_stan_scale`; a real outcome must also lie in public ``bounds``."""
        arr = super().to_stan_scale(y, bounds)
        if bounds is not None and self.outcome == "real":
            from dpsynth.models import _first_bad

            lo, hi = bounds
            _first_bad("y", (arr < lo) | (arr > hi), f"lies outside the public bounds [{lo}, {hi}]")
        return arr

    def public_precheck(self, synthesizer: Any, neighbours: str, seed: int) -> dict[str, Any]:
        """:func:`public_precheck` for this model, with the synthesizer's public inputs."""
        return public_precheck(self, synthesizer, neighbours, seed)

    def check_fit(self, stan_fit: engine.StanFit) -> None:
        """Refuse a confidential fit in which the record function raised (:func:`record_exceptions`)."""
        raised = record_exceptions(self, stan_fit)
        if raised:
            assert self.pieces is not None
            name = self.pieces.density
            raise _refuse(
                "functions",
                f"{name} raised a Stan exception on the confidential data "
                f"[CONFIDENTIAL, do not publish: {raised} evaluation(s)]: an exception rejects "
                "the proposal, a term the clamp cannot bound, so nothing is released (the "
                f"attempt still counts against any budget file); make {name} "
                "return a value for every outcome and parameter value (-inf is allowed: test "
                "the argument and return negative_infinity(), or use a log-scale form such "
                "as poisson_log_lpmf)",
            )


def record_exceptions(model: PiecesModel, stan_fit: engine.StanFit) -> int:
    """Stan exceptions of a fit that came through a statement reading the outcome.

    Counted from :attr:`~dpsynth.engine.StanFit.exception_lines`: an exception whose outermost
    statement reads ``dpsynth_y[`` (the record loop) was raised by the record function on a
    confidential outcome. Exceptions of the prior, the parameters' constraints, the
    transformed parameters and the probe loop (the record function at a public outcome and
    every distinct public covariate row, evaluated before the records, so an exception that
    any outcome would raise at these parameter values comes through the probe) depend on
    public inputs only and are not counted.
    """
    lines = engine.program_code(model.stan_file).splitlines()
    return sum(
        count
        for line, count in stan_fit.exception_lines.items()
        if 0 < line <= len(lines) and "dpsynth_y[" in lines[line - 1]
    )


def from_pieces(path: str | Path) -> PiecesModel:
    """A :class:`PiecesModel` from a pieces file: parsed, scope-checked, programs written.

    The scope is checked here under substitution (the wider public scope); a release under
    add-remove checks it again without ``n`` and ``X`` (:func:`public_precheck`).
    """
    pieces = read_pieces(path)
    check_scope(pieces, "substitution")
    fit, synthesis = _fit_program(pieces), _synthesis_program(pieces)
    for program in (fit, synthesis):  # e.g. a local variable named n: refused here, in one line
        _compiles(program, pieces, "substitution")
    stem = re.sub(r"\W", "_", pieces.source) or "pieces"
    fit_file = _write_program(fit.code, stem, "fit")
    synthesis_file = _write_program(synthesis.code, stem, "synthesis")
    return PiecesModel(
        name=pieces.source,
        stan_file=fit_file,
        outcome=pieces.outcome,
        covariates=True,
        simulate=_Synthesis(pieces, synthesis_file),
        centred=True,
        pieces=pieces,
        synthesis_file=synthesis_file,
    )


# --- the public pre-check of the premise "the record function is total" ------------------


def outcome_grid(outcome: str, bounds: tuple[float, float] | None) -> np.ndarray:
    """Public outcomes at which the record function must evaluate without an exception.

    Between public ``bounds``: :data:`GRID_POINTS` values from lo to hi (counts: the
    distinct integers among them, from max(lo, 0)); without bounds the fixed grids
    :data:`GRID_REAL` / :data:`GRID_COUNT`. Never read from the data.
    """
    if bounds is None:
        return np.asarray(GRID_COUNT if outcome == "count" else GRID_REAL)
    lo, hi = float(bounds[0]), float(bounds[1])
    grid = np.linspace(lo, hi, GRID_POINTS)
    if outcome == "count":
        return np.unique(np.rint(np.clip(grid, max(lo, 0.0), None))).astype(np.int64)
    return grid


def _covariate_rows(X: np.ndarray) -> np.ndarray:
    """Up to :data:`COVARIATE_ROWS` distinct rows of the public design, evenly spread."""
    rows = np.unique(np.asarray(X, dtype=float), axis=0)
    picks = np.unique(np.linspace(0, rows.shape[0] - 1, COVARIATE_ROWS).astype(int))
    return rows[picks]


def _prior_inputs(X: np.ndarray, outcome: str) -> dict[str, Any]:
    """Fit-program data with the likelihood off: public design, a zero outcome, no weights."""
    n = X.shape[0]
    zeros = np.zeros(n, dtype=np.int64 if outcome == "count" else float)
    data = {"n": n, "K": X.shape[1], "X": X, "y": zeros, "alpha": np.zeros(n)}
    data.update(centre=np.zeros(n), censor=0, M=0.0, want_contrib=0)
    return fit_inputs(data, prior_only=True)


def _grid_inputs(rows: np.ndarray, grid: np.ndarray) -> dict[str, Any]:
    """Fit-program data evaluating every (covariate row, grid outcome) pair, likelihood off."""
    X = np.repeat(rows, grid.size, axis=0)
    y = np.tile(grid, rows.shape[0])
    n = y.size
    data = {"n": n, "K": rows.shape[1], "X": X, "y": y, "alpha": np.ones(n)}
    data.update(centre=np.zeros(n), censor=1, M=1.0, want_contrib=1)
    return fit_inputs(data, prior_only=True)


def public_precheck(
    model: PiecesModel, synthesizer: Any, neighbours: str, seed: int
) -> dict[str, Any]:
    """Check the pieces before any confidential value is read; return what the report states.

    1. The scope under the release's neighbour relation (:func:`check_scope`).
    2. The premise "the record function is total on the public domain": prior draws (the fit
       program with the likelihood off, on public inputs: the design under substitution, one
       intercept row under add-remove), then the record function at every outcome of
       :func:`outcome_grid` and public covariate row; a Stan exception there is refused.

    Reads ``synthesizer.X``-derived design and ``synthesizer.bounds`` only (public).
    """
    from dpsynth.models import design_matrix

    pieces, backend = model.pieces, synthesizer.sampler.backend
    assert pieces is not None
    check_scope(pieces, neighbours)
    if neighbours == "add-remove":
        X = np.ones((1, 1))
    else:
        X = design_matrix(synthesizer.n, synthesizer.X)
    try:
        prior = engine.fit(
            model.stan_file,
            _prior_inputs(X, pieces.outcome),
            seed=seed % (2**31),
            backend=backend,
            **PRIOR_SAMPLER,
        )
    except InputError:
        raise _refuse("prior", "could not be sampled; a proper prior is needed") from None
    picks = np.linspace(0, prior.n_draws - 1, PRIOR_DRAWS).astype(int)
    draws = {k: v[picks] for k, v in prior.draws.items()}
    grid, rows = outcome_grid(pieces.outcome, synthesizer.bounds), _covariate_rows(X)
    try:
        outs = engine.outputs_at(
            model.stan_file, _grid_inputs(rows, grid), _param_dicts(pieces, draws), backend=backend
        )
    except InputError:
        raise _refuse(
            "functions",
            f"{pieces.density} raised a Stan exception at a public outcome (grid "
            f"{grid.min():g} to {grid.max():g}) at a prior draw; a record function must return "
            "a value (-inf is allowed) for every outcome in the public domain: an exception "
            "rejects the proposal, a term the clamp cannot bound",
        ) from None
    finite = sum(
        np.isfinite(np.asarray(o["record_log_lik"], float).reshape(rows.shape[0], grid.size)).sum(
            axis=0
        )
        for o in outs
    )
    probe = choose_probe(grid, np.asarray(finite), pieces.outcome)
    model.probes[_bounds_key(synthesizer.bounds)] = probe
    return {
        "scope": f"the pieces compile with public data only ({neighbours} neighbours)",
        "record_function_total": {
            "prior_draws": int(picks.size),
            "outcomes": int(grid.size),
            "covariate_rows": int(rows.shape[0]),
            "probe_outcome": probe,
            "note": (
                "tested at these public points before the fit, and the release is refused "
                "if the record function raised in the confidential fit; a premise of the "
                "proof (not proved)"
            ),
        },
    }
