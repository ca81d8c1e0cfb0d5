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
  the clamp and the sum by ``dpsynth_centred_target`` (``dpsynth/stan/dpsynth_functions.stan``), and
  the generated quantities the :class:`~dpsynth.mechanisms.posterior.Synthesizer` reads;
* the **synthesis program**: public inputs and the number of records only, the user's
  parameters, and ``y_rep`` from ``record_rng`` per record, run at a posterior draw with
  Stan's fixed-parameter sampler. It never holds the outcome.

The fit program never evaluates the record function at a confidential value: it evaluates
it at every **public cell** (an outcome of a public grid between the public bounds, a
distinct row of the public design) at every parameter value, and record i's term is its
cell's value (its outcome snapped to the nearest grid outcome). So a Stan exception inside
the record function (which rejects the parameter value), its running time and a
non-finite gradient are the same for every database: the data enter only through which
cell each record's clamped term is read from (``book/stan_convention.md``, the
proposition). :func:`public_precheck` still evaluates every cell at prior draws before
the data are read, to tell the author early that the record function is not total.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dpsynth import engine
from dpsynth.engine.common import write_atomically
from dpsynth.errors import InputError
from dpsynth.models import synthesis
from dpsynth.models.catalogue import Model
from dpsynth.models.mirrors import Draws

ALLOWED_BLOCKS = ("functions", "parameters", "transformed parameters", "prior")
"""The pieces a user writes; any other block (data, transformed data, model, ...) is refused."""
REQUIRED_BLOCKS = ("functions", "parameters", "prior")
FORBIDDEN_CALLS = ("print", "reject", "fatal_error")
"""Statements that could carry a value out of a fit (to a terminal or an error message)."""
RESERVED_PREFIX = "dpsynth_"
"""Prefix of every name dpsynth gives confidential data; refused in the user's pieces."""
PRIOR_DRAWS = 8
"""Prior draws at which the record function is evaluated (:func:`public_precheck`)."""
PRIOR_SAMPLER = {"chains": 1, "iter_warmup": 300, "iter_sampling": 200}
"""The short NUTS run of the prior (likelihood switched off, public inputs only)."""


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
    from dpsynth.models.program_checks import declared_names, program_blocks

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
    """The fit program: dpsynth's data, cells, clamp and sum around the user's pieces.

    The record function is evaluated at every public cell (an outcome of the public grid,
    a distinct public covariate row; :class:`Cells`) at every parameter value, whatever the
    data; record i's term is its cell's value, which ``dpsynth_centred_target`` weights,
    centres and clamps to [-M, M] and sums (Hu, Williams & Savitsky, Eq. 3.5;
    ``dpsynth/stan/dpsynth_functions.stan``). So whether an evaluation raises, how long it takes
    and whether its gradient is finite never depend on the confidential data, which enter
    only as record i's cell index. With ``dpsynth_prior_only = 1`` the likelihood is off.
    """
    kind = "int" if pieces.outcome == "count" else "real"
    call = f"{pieces.density}(dpsynth_grid[dpsynth_g] | dpsynth_rows[dpsynth_u], {_args(pieces)})"
    cells = _CELLS.format(call=call)
    p = _Program()
    p.block("functions", "#include dpsynth_functions.stan\n" + pieces.functions, "functions")
    p.block("data", _FIT_DATA.format(kind=kind), "dpsynth")
    _user_blocks(p, pieces)
    p.block(
        "model",
        "  {\n" + pieces.prior + "\n  }\n" + _FIT_MODEL.format(cells=cells),
        "prior",
    )
    p.block("generated quantities", _FIT_OUTPUTS.format(cells=cells), "dpsynth")
    return p


_FIT_DATA = """
  int<lower=0> n;
  int<lower=1> K;
  matrix[n, K] X;
  int<lower=1> dpsynth_G;
  array[dpsynth_G] {kind} dpsynth_grid;
  int<lower=1> dpsynth_U;
  matrix[dpsynth_U, K] dpsynth_rows;
  array[n] int<lower=1, upper=dpsynth_G * dpsynth_U> dpsynth_cell;
  vector<lower=0, upper=1>[n] dpsynth_alpha;
  vector[n] dpsynth_centre;
  int<lower=0, upper=1> dpsynth_censor;
  real<lower=0> dpsynth_M;
  int<lower=0, upper=1> dpsynth_want_contrib;
  int<lower=0, upper=1> dpsynth_prior_only;
"""

_CELLS = """
    vector[dpsynth_G * dpsynth_U] dpsynth_cells;
    // every public cell (grid outcome, distinct public covariate row), whatever the data
    for (dpsynth_u in 1:dpsynth_U) {{
      for (dpsynth_g in 1:dpsynth_G) {{
        dpsynth_cells[(dpsynth_u - 1) * dpsynth_G + dpsynth_g] = {call};
      }}
    }}
"""

_FIT_MODEL = """
  if (dpsynth_prior_only == 0) {{
{cells}
    target += dpsynth_centred_target(dpsynth_cells[dpsynth_cell], dpsynth_centre,
                                     dpsynth_alpha, dpsynth_censor, dpsynth_M);
  }}
"""

_FIT_OUTPUTS = """
  vector[dpsynth_want_contrib ? n : 0] contrib;
  vector[dpsynth_want_contrib ? n : 0] contrib_uncensored;
  vector[dpsynth_want_contrib ? n : 0] record_log_lik;
  if (dpsynth_want_contrib == 1) {{
{cells}
    record_log_lik = dpsynth_cells[dpsynth_cell];
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
    (:func:`dpsynth.models.synthesis.pieces_y_rep`, which passes the program the public inputs and
    the draw's parameters, nothing else)."""

    pieces: Pieces
    stan_file: Path

    def __call__(self, draw: Mapping[str, Any], public: Mapping[str, Any], n_out: int, rng: Any):
        names = self.pieces.parameter_names
        return synthesis.pieces_y_rep(self.stan_file, names, draw, public, n_out, rng)


@dataclass(frozen=True)
class _StanMirror:
    """``record_log_lik(draws, data)`` of a pieces model, evaluated by its own fit program
    (likelihood off, generated ``record_log_lik`` on, at the public cells): S x n. Used where
    dpsynth needs the record log-likelihood at other draws than the fit's (reference
    weights, reference centring)."""

    pieces: Pieces
    stan_file: Path
    domain: tuple[float, float]
    grid_max: int

    def __call__(self, draws: Draws, data: dict[str, Any]) -> np.ndarray:
        data = dict(data, want_contrib=1)
        outcome = self.pieces.outcome
        inputs = fit_inputs(data, self.domain, outcome, prior_only=True, grid_max=self.grid_max)
        outs = engine.outputs_at(self.stan_file, inputs, _param_dicts(self.pieces, draws))
        return np.vstack([np.asarray(o["record_log_lik"], dtype=float).ravel() for o in outs])


# --- the public cells ------------------------------------------------------------------

GRID_MAX = 1001
"""Most outcomes in a pieces model's public grid (evenly spaced between the public bounds)."""
GRID_MIN = 21
"""Fewest outcomes in the grid: with more distinct covariate rows than
:data:`CELL_BUDGET` / GRID_MIN the model is refused before the data are read."""
CELL_BUDGET = 20_000
"""Cells (grid outcomes x distinct public covariate rows) a fit evaluates per log density:
the grid has min(:data:`GRID_MAX`, CELL_BUDGET // rows) outcomes, at least :data:`GRID_MIN`."""


def grid_size(n_rows: int, grid_max: int = GRID_MAX) -> int:
    """Outcomes in the public grid for ``n_rows`` distinct public covariate rows (public):
    min(``grid_max``, CELL_BUDGET // n_rows), at least GRID_MIN (or ``grid_max`` if fewer)."""
    return int(min(grid_max, max(GRID_MIN, CELL_BUDGET // max(int(n_rows), 1))))


def require_domain(bounds: tuple[float, float] | None, outcome: str) -> tuple[float, float]:
    """The public bounds of a pieces model's outcome; refused (``bounds``) without them."""
    if bounds is None:
        raise InputError(
            "bounds",
            "a pieces model needs public bounds of the outcome: its record function is "
            "evaluated on a public grid between them (pass bounds, --bounds)",
        )
    lo, hi = float(bounds[0]), float(bounds[1])
    if outcome == "count" and lo < 0:
        raise InputError("bounds", f"a count outcome's lower bound must be 0 or more (got {lo:g})")
    return lo, hi


def outcome_grid(outcome: str, bounds: tuple[float, float], size: int = GRID_MAX) -> np.ndarray:
    """The public outcomes at which the record function is evaluated: ``size`` evenly spaced
    values from lo to hi (counts: the integers between them, or ``size`` evenly spaced
    integers when there are more). Never read from the data."""
    lo, hi = float(bounds[0]), float(bounds[1])
    if outcome == "count":
        lo_i, hi_i = int(np.ceil(lo)), int(np.floor(hi))
        if hi_i - lo_i + 1 <= size:
            return np.arange(lo_i, hi_i + 1, dtype=np.int64)
        return np.unique(np.rint(np.linspace(lo_i, hi_i, size))).astype(np.int64)
    return np.linspace(lo, hi, size)


def public_rows(X: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the public design and each record's row (0-based): at least one
    row (the intercept row), so that the cells never depend on whether there are records."""
    X = np.asarray(X, dtype=float).reshape(-1, K)
    if X.shape[0] == 0:
        return np.ones((1, K)), np.zeros(0, dtype=np.int64)
    rows, which = np.unique(X, axis=0, return_inverse=True)
    return rows, np.asarray(which).ravel().astype(np.int64)


def snap(y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Each outcome's nearest grid point (0-based index; ties to the lower point): a
    function of the record alone and the public grid."""
    y = np.asarray(y, dtype=float)
    upper = np.clip(np.searchsorted(grid, y), 1, grid.size - 1) if grid.size > 1 else None
    if upper is None:
        return np.zeros(y.size, dtype=np.int64)
    lower = upper - 1
    take_upper = np.abs(grid[upper] - y) < np.abs(y - grid[lower])
    return np.where(take_upper, upper, lower).astype(np.int64)


def fit_inputs(
    data: Mapping[str, Any],
    domain: tuple[float, float],
    outcome: str,
    prior_only: bool = False,
    grid_max: int = GRID_MAX,
) -> dict[str, Any]:
    """The fit program's data from the convention's data dict (:func:`dpsynth.models.catalogue.stan_data`).

    Public: the grid (:func:`outcome_grid` on ``domain``, :func:`grid_size` outcomes) and
    the distinct rows of the public ``X``; confidential: each record's cell (its outcome
    snapped to the grid, :func:`snap`, and its row), weight and centre, under reserved
    ``dpsynth_`` names.
    """
    n, K = int(data["n"]), int(data["K"])
    rows, which = public_rows(data["X"], K)
    grid = outcome_grid(outcome, domain, grid_size(rows.shape[0], grid_max))
    cell = which * grid.size + snap(np.asarray(data["y"]), grid) + 1
    return {
        "n": n,
        "K": K,
        "X": np.asarray(data["X"], dtype=float).reshape(n, K),
        "dpsynth_G": int(grid.size),
        "dpsynth_grid": grid.astype(np.int64) if outcome == "count" else grid,
        "dpsynth_U": int(rows.shape[0]),
        "dpsynth_rows": rows,
        "dpsynth_cell": cell.astype(np.int64),
        "dpsynth_alpha": data["alpha"],
        "dpsynth_centre": data["centre"],
        "dpsynth_censor": int(data["censor"]),
        "dpsynth_M": float(data["M"]),
        "dpsynth_want_contrib": int(data["want_contrib"]),
        "dpsynth_prior_only": int(prior_only),
    }


def require_cells(
    outcome: str, domain: tuple[float, float], X: np.ndarray, grid_max: int = GRID_MAX
) -> dict[str, int]:
    """The cells a fit will evaluate (public), refused (``covariates``) above
    :data:`CELL_BUDGET` at :data:`GRID_MIN` outcomes."""
    K = int(np.shape(X)[1]) if np.ndim(X) == 2 else 1
    rows, _ = public_rows(X, K)
    if rows.shape[0] * GRID_MIN > CELL_BUDGET:
        raise InputError(
            "covariates",
            f"a pieces model is evaluated at every distinct public covariate row: "
            f"{rows.shape[0]} rows x {GRID_MIN} outcomes exceed the {CELL_BUDGET} cells a fit "
            "may evaluate; round or bin the covariates (public) to fewer distinct values",
        )
    grid = outcome_grid(outcome, domain, grid_size(rows.shape[0], grid_max))
    return {"outcomes": int(grid.size), "covariate_rows": int(rows.shape[0])}


# --- the model ------------------------------------------------------------------------


@dataclass(frozen=True)
class PiecesModel(Model):
    """A user's model given as pieces (:class:`Pieces`), assembled by dpsynth.

    ``stan_file`` is the assembled fit program, ``synthesis_file`` the synthesis program;
    ``simulate`` runs the latter. The design always has an intercept column first
    (:func:`dpsynth.models.catalogue.design_matrix`), so the record functions' ``x`` is
    ``[1, covariates...]`` (``[1]`` without covariates). ``domain``: the public bounds of
    the outcome, set by :meth:`for_domain` (a fit needs them: its grid lies between them);
    ``grid_max``: the most grid outcomes (:func:`grid_size`; public, set by :func:`from_pieces`).
    """

    pieces: Pieces | None = None
    synthesis_file: Path | None = None
    domain: tuple[float, float] | None = None
    grid_max: int = GRID_MAX

    @property
    def user_program(self) -> bool:
        """False: the program is dpsynth's assembly, not a whole user program."""
        return False

    def for_domain(self, bounds: tuple[float, float] | None) -> PiecesModel:
        """This model on the public ``bounds`` of its outcome (refused without them)."""
        return replace(self, domain=require_domain(bounds, self.outcome))

    def fit_inputs(
        self, data: Mapping[str, Any], bounds: tuple[float, float] | None = None
    ) -> dict[str, Any]:
        """The fit program's data (:func:`fit_inputs`) on the public ``bounds`` (default
        the model's domain)."""
        domain = require_domain(bounds if bounds is not None else self.domain, self.outcome)
        return fit_inputs(data, domain, self.outcome, grid_max=self.grid_max)

    def log_lik_mirror(self) -> _StanMirror:
        """The record log-likelihood at any draws, by the fit program itself."""
        assert self.pieces is not None
        domain = require_domain(self.domain, self.outcome)
        return _StanMirror(self.pieces, self.stan_file, domain, self.grid_max)

    def to_stan_scale(self, y: Any, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """As :meth:`dpsynth.models.catalogue.Model.to_stan_scale`; the outcome must also lie in the
        public ``bounds`` (the model's domain: records outside it are not in the input domain)."""
        arr = super().to_stan_scale(y, bounds)
        if bounds is not None:
            from dpsynth.models.catalogue import _first_bad

            lo, hi = bounds
            _first_bad("y", (arr < lo) | (arr > hi), f"lies outside the public bounds [{lo}, {hi}]")
        return arr

    def public_precheck(self, synthesizer: Any, neighbours: str, seed: int) -> dict[str, Any]:
        """:func:`public_precheck` for this model, with the synthesizer's public inputs."""
        return public_precheck(self, synthesizer, neighbours, seed)

    def starting_fit(
        self, inputs: Mapping[str, Any], chains: int, iter_sampling: int, seed: int
    ) -> engine.StanFit:
        """:func:`starting_fit` for this model."""
        return starting_fit(self, inputs, chains, iter_sampling, seed)


def from_pieces(path: str | Path, grid_max: int = GRID_MAX) -> PiecesModel:
    """A :class:`PiecesModel` from a pieces file: parsed, scope-checked, programs written.

    The scope is checked here under substitution (the wider public scope); a release under
    add-remove checks it again without ``n`` and ``X`` (:func:`public_precheck`).
    ``grid_max`` (at least 2): the most outcomes of the public grid (fewer: a faster fit, a
    coarser snapping of each outcome).
    """
    if isinstance(grid_max, bool) or not isinstance(grid_max, int) or grid_max < 2:
        raise InputError("grid_max", f"must be an integer of at least 2 (got {grid_max!r})")
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
        grid_max=grid_max,
    )


# --- the public pre-check: fail fast, before any confidential value is read -------------


def _prior_inputs(
    X: np.ndarray, outcome: str, domain: tuple[float, float], grid_max: int, cells: bool = False
) -> dict[str, Any]:
    """Fit-program data with the likelihood off, from public inputs only: the rows of ``X``
    as records, each at the domain's lower bound. With ``cells`` the generated quantities
    evaluate the record function at every public cell (whatever the records)."""
    n = X.shape[0]
    y = np.full(n, domain[0]) if outcome == "real" else np.full(n, int(np.ceil(domain[0])))
    data = {"n": n, "K": X.shape[1], "X": X, "y": y, "alpha": np.zeros(n)}
    data.update(centre=np.zeros(n), censor=0, M=0.0, want_contrib=int(cells))
    return fit_inputs(data, domain, outcome, prior_only=True, grid_max=grid_max)


def public_precheck(
    model: PiecesModel, synthesizer: Any, neighbours: str, seed: int
) -> dict[str, Any]:
    """Check the pieces before any confidential value is read; return what the report states.

    1. The scope under the release's neighbour relation (:func:`check_scope`).
    2. The public domain and cells (:func:`require_domain`, :func:`require_cells`).
    3. Fail fast: prior draws (the fit program with the likelihood off, on public inputs),
       then the record function at every public cell; an exception there is refused. This
       is not the proof's premise (the fit evaluates every cell whatever the data, so an
       exception rejects a parameter value for every database alike): it tells the author
       early that the record function is not total on the public domain.

    Reads ``synthesizer.X``-derived design and ``synthesizer.bounds`` only (public).
    """
    from dpsynth.models.catalogue import design_matrix

    pieces, backend = model.pieces, synthesizer.sampler.backend
    assert pieces is not None
    check_scope(pieces, neighbours)
    domain = require_domain(synthesizer.bounds, pieces.outcome)
    if neighbours == "add-remove":
        X = np.ones((1, 1))
    else:
        X = design_matrix(synthesizer.n, synthesizer.X)
    cells = require_cells(pieces.outcome, domain, X, model.grid_max)
    try:
        prior = engine.fit(
            model.stan_file,
            _prior_inputs(X, pieces.outcome, domain, model.grid_max),
            seed=seed % (2**31),
            backend=backend,
            **PRIOR_SAMPLER,
        )
    except InputError:
        raise _refuse("prior", "could not be sampled; a proper prior is needed") from None
    picks = np.linspace(0, prior.n_draws - 1, PRIOR_DRAWS).astype(int)
    draws = {k: v[picks] for k, v in prior.draws.items()}
    try:
        engine.outputs_at(
            model.stan_file,
            _prior_inputs(X, pieces.outcome, domain, model.grid_max, cells=True),
            _param_dicts(pieces, draws),
            backend=backend,
        )
    except InputError:
        raise _refuse(
            "functions",
            f"{pieces.density} raised a Stan exception at a public outcome (grid "
            f"{domain[0]:g} to {domain[1]:g}) at a prior draw; a record function must return "
            "a value (-inf is allowed) for every outcome in the public domain",
        ) from None
    return {
        "scope": f"the pieces compile with public data only ({neighbours} neighbours)",
        "cells": {
            **cells,
            "note": (
                "the record function is evaluated at every public cell (grid outcome, "
                "distinct public covariate row) at every parameter value, whatever the data; "
                "each record's outcome is its nearest grid outcome"
            ),
        },
        "record_function_total": {
            "prior_draws": int(picks.size),
            "note": "checked at every public cell at these prior draws before the data are read",
        },
    }


# --- a sampler that cannot start: the chains stay at their public starting points --------


def starting_fit(
    model: PiecesModel, inputs: Mapping[str, Any], chains: int, iter_sampling: int, seed: int
) -> engine.StanFit:
    """The fit of chains that never left their starting points, each a public prior draw.

    Used when Stan refuses to start on the confidential data (every initial value with a
    non-finite gradient, which a record function can make depend on which cells records
    read): NUTS at such a point rejects every proposal, so its chains would stay there.
    The starting points come from the prior (the fit program with the likelihood off, on
    the public cells and rows only); the per-record terms are read from the cells at them
    (no gradient is computed). The release is then made as any other, and its confidential
    verdict says the sampler did not start (``diagnostics["started"] = 0``).
    """
    assert model.pieces is not None
    rows, _ = public_rows(inputs["X"], int(inputs["K"]))
    domain = require_domain(model.domain, model.outcome)
    prior = engine.fit(
        model.stan_file,
        _prior_inputs(rows, model.outcome, domain, model.grid_max),
        seed=seed % (2**31),
        chains=chains,
        iter_warmup=PRIOR_SAMPLER["iter_warmup"],
        iter_sampling=1,
    )
    starts = _param_dicts(model.pieces, prior.draws)
    at = dict(inputs, dpsynth_want_contrib=1, dpsynth_prior_only=1)
    outs = engine.outputs_at(model.stan_file, at, starts)
    draws = {k: np.repeat(v, iter_sampling, axis=0) for k, v in prior.draws.items()}
    terms = {
        key: np.repeat(
            np.vstack([np.asarray(o[key], float).ravel() for o in outs]), iter_sampling, 0
        )
        for key in ("contrib", "contrib_uncensored", "record_log_lik")
    }
    stuck = {"rhat_max": float("inf"), "ess_bulk_min": 0.0, "divergences": 0, "started": 0}
    return engine.StanFit(
        draws, chains, stuck, prior.backend, seed, **terms, param_names=prior.param_names
    )
