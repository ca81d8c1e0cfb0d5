"""dpsynth.models.pieces: a user's model as pieces, private by construction.

Fast tests (stanc only, well under a second each): the example files parse and compile in
the public scope; every attack of issue 26 rewritten against the pieces is refused at
compile time, naming the piece, or shown harmless. Slow tests (a C++ build each on first
use): a closed-form posterior through the pieces, releases on censor-uw, censor-w with
reference weights and the aDP mechanisms, the pieces versions of shipped models against the
shipped programs, the public pre-check of the record function, the CLI, and a fit's Stan
output withheld whatever the verbosity.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth import engine
from dpsynth.cli.commands import main
from dpsynth.errors import InputError
from dpsynth.mechanisms.posterior import Synthesizer
from dpsynth.models import pieces, synthesis
from dpsynth.models.catalogue import MODELS, stan_data
from dpsynth.release.single import synthesize
from dpsynth.sampler import Sampler

EXAMPLES = Path(__file__).resolve().parents[1] / "dpsynth" / "stan" / "examples" / "pieces"
TEST_STAN = Path(__file__).resolve().parent / "stan"
NORMAL = EXAMPLES / "normal_known_sd.pieces"
INTERCEPT_ONLY = ("normal_known_sd", "normal", "lognormal", "poisson")

GRID = 201
"""Grid outcomes of the tests' normal model: step 0.05 between the bounds -4 and 6."""

HONEST = """
functions {
  real record_lpdf(real y, row_vector x, real mu) { return normal_lpdf(y | mu, 1); }
  real record_rng(row_vector x, real mu) { return normal_rng(mu, 1); }
}
parameters { real mu; }
prior { mu ~ normal(0, 10); }
"""


def _with(old: str, new: str) -> str:
    assert old in HONEST
    return HONEST.replace(old, new)


# ----------------------------------------------------------------------------- the examples


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.pieces")))
def test_examples_parse_and_compile_in_the_public_scope(name):
    parsed = pieces.read_pieces(EXAMPLES / f"{name}.pieces")
    pieces.check_scope(parsed, "substitution")
    if name in INTERCEPT_ONLY:  # no n, no X: also fine under add-remove
        pieces.check_scope(parsed, "add-remove")
    assert parsed.outcome == ("count" if name == "poisson" else "real")


def test_arguments_are_parameters_then_transformed_parameters_in_order():
    parsed = pieces.read_pieces(EXAMPLES / "hierarchical.pieces")
    assert parsed.parameter_names == ("intercept", "z", "tau", "sigma")
    assert parsed.arguments == ("intercept", "z", "tau", "sigma", "beta")


def test_fit_program_is_dpsynths_code_around_the_pieces():
    parsed = pieces.parse_pieces(HONEST)
    fit = pieces.fit_program(parsed)
    # calls at public cells only (grid outcome, public row): never at a confidential value
    call = "record_lpdf(dpsynth_grid[dpsynth_g] | dpsynth_rows[dpsynth_u], mu)"
    assert fit.count("record_lpdf(") == 3 and fit.count(call) == 2  # model, outputs
    assert "dpsynth_y" not in fit  # the outcome is not even declared: only its cell index
    assert "target += dpsynth_centred_target(dpsynth_cells[dpsynth_cell], dpsynth_centre," in fit
    assert fit.count("target +=") == 1  # the only target statement outside the prior
    assert engine.stanc_errors(engine.program_code(_written(fit))) is None
    synth = pieces.synthesis_program(parsed)
    assert "dpsynth_y" not in synth and "alpha" not in synth and "centre" not in synth
    assert "y_rep[dpsynth_i] = record_rng(X[dpsynth_i], mu);" in synth
    assert engine.stanc_errors(synth) is None


def _written(code: str) -> Path:
    return pieces._write_program(code, "test", "fit")


def test_synthesis_inputs_are_public_only():
    data = {"K": 1, "X": np.ones((5, 1)), "n": 5}  # no y, alpha or centre to read
    assert synthesis.pieces_inputs(data, 8)["X"].shape == (8, 1)
    reg = {"K": 2, "X": np.ones((5, 2))}
    assert synthesis.pieces_inputs(reg, 5)["n"] == 5
    with pytest.raises(InputError) as exc:
        synthesis.pieces_inputs(reg, 8)
    assert exc.value.param == "n_synthetic"


def test_public_grid_never_reads_the_data():
    grid = pieces.outcome_grid("real", (-2.0, 2.0))
    assert grid.size == pieces.GRID_MAX and grid.min() == -2.0 and grid.max() == 2.0
    assert pieces.outcome_grid("count", (0, 4)).tolist() == [0, 1, 2, 3, 4]
    wide = pieces.outcome_grid("count", (0, 10**6), 11)
    assert wide.tolist() == [10**5 * k for k in range(11)]
    # the grid shrinks with the distinct public rows, within [GRID_MIN, GRID_MAX]
    assert pieces.grid_size(1) == pieces.GRID_MAX
    assert pieces.grid_size(100) == pieces.CELL_BUDGET // 100
    assert pieces.grid_size(10**6) == pieces.GRID_MIN


def test_records_are_snapped_to_their_nearest_cell():
    """Each record's cell is its nearest grid outcome and its public row: a function of the
    record alone (so neighbours differ in one cell index)."""
    grid = pieces.outcome_grid("real", (0.0, 1.0), 11)
    y = np.array([0.0, 0.04, 0.06, 0.5, 0.94, 1.0])
    assert grid[pieces.snap(y, grid)].tolist() == pytest.approx([0.0, 0.0, 0.1, 0.5, 0.9, 1.0])
    X = np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 2.0]])
    data = {"n": 3, "K": 2, "X": X, "y": np.array([0.0, 0.5, 1.0]), "alpha": np.ones(3)}
    data.update(centre=np.zeros(3), censor=1, M=1.0, want_contrib=0)
    inputs = pieces.fit_inputs(data, (0.0, 1.0), "real")
    G = inputs["dpsynth_G"]
    assert inputs["dpsynth_U"] == 2 and G == pieces.grid_size(2)
    rows = inputs["dpsynth_rows"]
    for i, cell in enumerate(inputs["dpsynth_cell"]):
        u, g = divmod(int(cell) - 1, G)
        assert np.array_equal(rows[u], X[i]) and inputs["dpsynth_grid"][g] == data["y"][i]
    changed = dict(data, y=np.array([0.0, 0.7, 1.0]))  # a neighbour: one record replaced
    other = pieces.fit_inputs(changed, (0.0, 1.0), "real")["dpsynth_cell"]
    assert (other != inputs["dpsynth_cell"]).sum() == 1


def test_a_pieces_model_needs_public_bounds_and_few_enough_cells():
    """Refused before any fit (public inputs only): no bounds (no grid), a count's negative
    lower bound, more distinct public covariate rows than the cell budget allows."""
    model = pieces.from_pieces(NORMAL)
    with pytest.raises(InputError, match=r"^bounds: a pieces model needs public bounds"):
        Synthesizer(np.zeros(5), model)
    with pytest.raises(InputError, match=r"^bounds: a count outcome's lower bound"):
        pieces.require_domain((-1.0, 5.0), "count")
    many = np.column_stack([np.ones(2000), np.arange(2000.0)])
    with pytest.raises(InputError, match=r"^covariates: a pieces model is evaluated at every"):
        pieces.require_cells("real", (0.0, 1.0), many)


# ----------------------------------------------------------------------------- the attacks

ATTACKS = [
    # (id, pieces text, neighbours, piece named, what the message says)
    ("prior-reads-y", _with("mu ~ normal(0, 10);", "mu ~ normal(mean(y), 10);"), "substitution",
     "prior", "not public data (n, K, X), a parameter or its own: y"),
    ("prior-switched-on-mean-y",
     _with("mu ~ normal(0, 10);", "if (mean(y) > 0.1) mu ~ normal(0, 1); else mu ~ normal(0, 10);"),
     "substitution", "prior", "refers to a name that is not public data"),
    ("prior-reads-n-under-add-remove", _with("mu ~ normal(0, 10);", "mu ~ normal(0, 10 + n);"),
     "add-remove", "prior", "not public data (K), a parameter or its own: n"),
    ("constraint-lower-min-y", _with("parameters { real mu; }", "parameters { real<lower=min(y)> mu; }"),
     "substitution", "parameters", "refers to a name that is not public data"),
    ("prior-reads-reserved-name", _with("mu ~ normal(0, 10);", "mu ~ normal(dpsynth_y[1], 10);"),
     "substitution", "prior", "names starting with dpsynth_ are dpsynth's"),
    ("record-reads-other-records",
     _with("return normal_lpdf(y | mu, 1);", "return normal_lpdf(y | mu + X[2, 1], 1);"),
     "substitution", "functions", "refers to a name that is not public data"),
    ("print-in-functions", _with("return normal_lpdf(y | mu, 1);", "print(y); return normal_lpdf(y | mu, 1);"),
     "substitution", "functions", "calls print()"),
    ("reject-in-prior", _with("mu ~ normal(0, 10);", "if (mu > 100) reject(mu); mu ~ normal(0, 10);"),
     "substitution", "prior", "calls reject()"),
    ("fatal-error-in-functions",
     _with("return normal_rng(mu, 1);", "fatal_error(\"x\"); return normal_rng(mu, 1);"),
     "substitution", "functions", "calls fatal_error()"),
    ("transformed-data-reads-outcome",
     HONEST + "transformed data { real m = mean(y); }", "substitution",
     "block 'transformed data'", "is not a piece"),
    ("own-data-block", "data { vector[10] y; }\n" + HONEST, "substitution", "block 'data'", "is not a piece"),
    ("own-model-block", HONEST + "model { target += 1; }", "substitution", "block 'model'", "is not a piece"),
    ("lp-function", _with("functions {", "functions {\n  void leak_lp(real v) { target += v; }"),
     "substitution", "functions", "define a _lp function"),
    ("include", "#include dpsynth_functions.stan\n" + HONEST, "substitution", "the file", "#include"),
    ("no-record-function", _with("real record_lpdf(", "real other_lpdf("), "substitution",
     "functions", "exactly one of record_lpdf and record_lpmf"),
    ("wrong-signature",
     _with("real record_rng(row_vector x, real mu)", "real record_rng(row_vector x, real mu, real s)"),
     "substitution", "record functions", "does not compile"),
    ("rng-in-density",
     _with("return normal_lpdf(y | mu, 1);", "return normal_lpdf(y | mu + normal_rng(0, 1), 1);"),
     "substitution", "functions", "does not compile"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "neighbours", "piece", "says"), [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS]
)
def test_attack_is_refused_at_compile_time_naming_the_piece(text, neighbours, piece, says):
    with pytest.raises(InputError) as exc:
        pieces.check_scope(pieces.parse_pieces(text), neighbours)
    message = str(exc.value)
    assert exc.value.param == "pieces"
    assert message.startswith(f"pieces: {piece} "), message
    assert says in message, message
    assert "\n" not in message  # one line


def test_assembled_programs_are_type_checked_before_any_build(tmp_path):
    """A name that collides with dpsynth's public data in the fit program is refused by
    from_pieces in one line naming the piece, before a C++ build."""
    path = tmp_path / "local_n.pieces"
    path.write_text(_with("mu ~ normal(0, 10);", "{ int n = 3; mu ~ normal(0, 10 * n); }"))
    with pytest.raises(InputError, match=r"^pieces: prior does not compile: Identifier 'n'"):
        pieces.from_pieces(path)


def test_same_pieces_pass_under_substitution_where_n_is_public():
    pieces.check_scope(pieces.parse_pieces(_with("mu ~ normal(0, 10);", "mu ~ normal(0, 10 + n);")))


def test_a_constant_in_the_prior_is_harmless():
    """The attack that widened the whole-program prior check (``target += 1e11``): in the
    pieces the prior is compiled without the data, so a constant is only a constant."""
    text = _with("mu ~ normal(0, 10);", "mu ~ normal(0, 10);\n  target += 1e11;")
    pieces.check_scope(pieces.parse_pieces(text), "add-remove")


# ----------------------------------------------------------------------------- fits (slow)


@pytest.fixture(scope="module")
def normal_model():
    """The known-sd normal pieces on a grid of 201 outcomes (step 0.05 on the tests' bounds
    -4 to 6): a fifth of the default's cells, so the tests run faster."""
    return pieces.from_pieces(NORMAL, grid_max=GRID)


@pytest.mark.slow
def test_closed_form_posterior_through_the_pieces(normal_model, stan_backend):
    """y_i ~ N(mu, 1), mu ~ N(0, 10^2), alpha = 1: mu | y ~ N(v sum(y), v), v = 1 / (n + 0.01).

    4 x 1000 draws, fixed seed: the posterior mean within 0.1 posterior sd (Monte Carlo
    error about 0.03 sd) and the sd within 10%.
    """
    y = np.random.default_rng(11).normal(1.5, 1.0, 50)
    y = np.round(y * 20) / 20  # on the public grid (step 0.05 between -4 and 6): no snapping
    syn = Synthesizer(y, normal_model, bounds=(-4.0, 6.0), seed=3, sampler=Sampler(4, 1000, 1000))
    draws = syn.unweighted().fit.stan_fit.draws["mu"]
    v = 1.0 / (y.size + 1.0 / 100.0)
    mean, sd = v * y.sum(), np.sqrt(v)
    assert abs(draws.mean() - mean) < 0.1 * sd
    assert abs(draws.std() / sd - 1) < 0.1


def _normal_data(seed: int = 12, n: int = 80) -> np.ndarray:
    return np.random.default_rng(seed).normal(1.0, 1.0, n)


@pytest.mark.slow
def test_pieces_release_on_censor_uw_is_dp(normal_model, converging_sampler, stan_backend):
    y = _normal_data()
    rel = synthesize(
        y, model=normal_model, mechanism="censor-uw", epsilon=8.0, bounds=(-4.0, 6.0),
        sampler=converging_sampler,
    )  # fmt: skip
    report = rel.report
    assert report["guarantee"] == "DP" and report["epsilon"] == 8.0, rel.diagnostics["mcmc"]
    assert "program_checks" not in report  # nothing to test: private by construction
    checks = report["pieces_checks"]
    assert checks["cells"]["outcomes"] == GRID
    assert checks["cells"]["covariate_rows"] == 1
    assert not np.isin(rel.data["y"].to_numpy(), y).any()


@pytest.mark.slow
def test_pieces_release_centred_at_public_values(normal_model, converging_sampler, stan_backend):
    """Centring at public parameter values: c_i = ll(y_i | mu_ref), evaluated by the fit
    program itself (record-only, so the guarantee is unchanged)."""
    y = _normal_data(22)
    syn = Synthesizer(y, normal_model, bounds=(-4.0, 6.0), seed=1)
    centre = syn._centre({"mu": 1.0})
    snapped = np.round(y * 20) / 20  # each record's nearest grid outcome (step 0.05)
    expected = -0.5 * (snapped - 1.0) ** 2 - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(centre, expected, rtol=1e-10)
    rel = synthesize(y, model=normal_model, mechanism="censor-uw", epsilon=2.0,
                     centring={"mu": 1.0}, bounds=(-4.0, 6.0), sampler=converging_sampler)  # fmt: skip
    assert rel.report["guarantee"] == "DP", rel.diagnostics["mcmc"]
    assert abs(rel.data["y"].mean() - y.mean()) < 1.0  # centred: records are not all clamped


@pytest.mark.slow
def test_pieces_release_under_add_remove_is_dp(normal_model, converging_sampler, stan_backend):
    rel = synthesize(
        _normal_data(), model=normal_model, mechanism="censor-uw", epsilon=8.0,
        neighbours="add-remove", n_synthetic=40, bounds=(-4.0, 6.0), sampler=converging_sampler,
    )  # fmt: skip
    assert rel.report["guarantee"] == "DP" and rel.data.shape == (40, 1)


@pytest.mark.slow
def test_pieces_on_censor_w_with_and_without_reference(
    normal_model, converging_sampler, stan_backend
):
    """Reference weights need the record log-likelihood of the confidential records at the
    reference fit's draws: the fit program evaluates it (likelihood off)."""
    y, reference = _normal_data(13), _normal_data(14)
    common = dict(model=normal_model, mechanism="censor-w", epsilon=8.0,
                  bounds=(-4.0, 6.0), sampler=converging_sampler)  # fmt: skip
    with_ref = synthesize(y, reference=reference, **common)
    assert with_ref.report["guarantee"] == "DP", with_ref.diagnostics["mcmc"]
    assert "public reference" in with_ref.report["guarantee_meaning"]
    without = synthesize(y, **common)
    assert without.report["guarantee"] == "none"  # weights from the confidential fit


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["unweighted", "lw", "cw", "sw", "weighted-e"])
def test_pieces_on_the_adp_mechanisms(normal_model, mechanism, small_sampler, stan_backend):
    """Every posterior mechanism runs a pieces model through dpsynth's assembled program."""
    options = {"radius": 10.0} if mechanism == "cw" else {}
    rel = synthesize(_normal_data(15), model=normal_model, mechanism=mechanism, epsilon=8.0,
                     bounds=(-4.0, 6.0), sampler=small_sampler, **options)  # fmt: skip
    assert rel.report["guarantee"] == "aDP" and rel.report["mechanism"] == mechanism


@pytest.mark.slow
def test_pieces_regression_uses_each_records_covariate_row(converging_sampler, stan_backend):
    """regression.pieces with one covariate: x_i = [1, standardized covariate]; the slope's
    posterior mean is near the truth (2 sd(x) on the standardized scale), and the release
    writes each synthetic outcome beside its record's covariates."""
    rng = np.random.default_rng(23)
    x = rng.integers(-3, 4, 120) * 0.5  # 7 distinct public rows: 7 x 201 cells per evaluation
    y = 1.0 + 2.0 * x + rng.normal(0.0, 0.5, x.size)
    model = pieces.from_pieces(EXAMPLES / "regression.pieces", grid_max=201)
    bounds = (-6.0, 8.0)
    fit = Synthesizer(y, model, X=x[:, None], bounds=bounds, seed=2, sampler=converging_sampler)
    fit = fit.unweighted()
    beta = fit.fit.stan_fit.draws["beta"]
    assert beta.shape[1] == 2
    assert abs(beta[:, 1].mean() - 2.0 * x.std()) < 0.1
    rel = synthesize(y, model=model, X=x[:, None], covariates=pd.DataFrame({"x": x}),
                     mechanism="censor-uw", epsilon=20.0, bounds=bounds,
                     sampler=converging_sampler)  # fmt: skip
    assert rel.report["guarantee"] == "DP", rel.diagnostics["mcmc"]
    assert list(rel.data.columns) == ["y", "x"] and np.array_equal(rel.data["x"], x)


@pytest.mark.slow
def test_pieces_hierarchical_prior_passes_transformed_parameters(long_sampler, stan_backend):
    """hierarchical.pieces: the transformed parameter beta reaches both record functions
    (the synthesis program recomputes it from the draw's parameters): synthetic outcomes
    follow the covariates."""
    rng = np.random.default_rng(24)
    X = rng.choice([-1.0, 1.0], size=(150, 3))  # 8 distinct public rows: 8 x 51 cells
    y = 0.5 + X @ np.array([1.0, 0.0, -1.0]) + rng.normal(0.0, 0.5, 150)
    model = pieces.from_pieces(EXAMPLES / "hierarchical.pieces", grid_max=51)
    rel = synthesize(y, model=model, X=X, mechanism="censor-uw", epsilon=20.0,
                     bounds=(-8.0, 9.0), sampler=long_sampler)  # fmt: skip
    assert rel.report["guarantee"] == "DP", rel.diagnostics["mcmc"]
    synthetic = rel.data["y"].to_numpy()
    assert np.corrcoef(synthetic, X[:, 0])[0, 1] > 0.5
    assert np.corrcoef(synthetic, X[:, 2])[0, 1] < -0.5


@pytest.mark.slow
def test_record_function_that_raises_is_refused_before_the_data(tmp_path, stan_backend):
    """The gap of issue 26: a scale theta - y makes Stan throw for y > theta. The public
    pre-check, at every public cell and prior draws, tells the author before any data are
    read (fail fast; the fit itself would reject such theta for every database alike)."""
    text = """
functions {
  real record_lpdf(real y, row_vector x, real theta) { return normal_lpdf(y | 0, theta - y); }
  real record_rng(row_vector x, real theta) { return uniform_rng(0, theta); }
}
parameters { real<lower=0> theta; }
prior { theta ~ exponential(1); }
"""
    path = tmp_path / "scale_from_y.pieces"
    path.write_text(text)
    model = pieces.from_pieces(path)  # compiles: the scope is fine
    with pytest.raises(InputError) as exc:
        synthesize(_normal_data(), model=model, mechanism="censor-uw", epsilon=4.0,
                   bounds=(-4.0, 6.0), sampler=Sampler(2, 200, 200))  # fmt: skip
    assert exc.value.param == "pieces"
    assert str(exc.value).startswith("pieces: functions record_lpdf raised a Stan exception")


WINDOW_TRAP = """
functions {
  real record_lpdf(real y, row_vector x, real mu) {
    // raises only for outcomes between 2.5 and 2.6 while mu lies in the posterior's
    // region (0.9, 1.1), where the prior's draws almost never are
    if (y >= 2.5 && y <= 2.6 && mu > 0.9 && mu < 1.1) {
      return poisson_lpmf(0 | mu - 2.0);
    }
    return normal_lpdf(y | mu, 1);
  }
  real record_rng(row_vector x, real mu) { return normal_rng(mu, 1); }
}
parameters { real mu; }
prior { mu ~ normal(0, 100); }
"""


@pytest.mark.slow
def test_a_window_that_raises_confines_every_database_alike(tmp_path, stan_backend):
    """A record function that raises in a narrow window of outcomes while mu lies in the
    posterior's region: the old record loop raised only when a record lay in the window, so
    the release was refused with the record and made without it. The fit now evaluates every
    public cell (the window's grid outcomes among them) at every mu, so the same values of mu
    are rejected for both databases: both are released, with the same public report fields,
    and no draw lies in the band (0.9, 1.1) either time."""
    path = tmp_path / "window.pieces"
    path.write_text(WINDOW_TRAP)
    model = pieces.from_pieces(path)
    y = _normal_data()
    planted = y.copy()
    planted[0] = 2.55  # inside the window
    outs = []
    for data in (y, planted):
        with pytest.warns(UserWarning):  # a seeded release is not private: said so
            rel = synthesize(data, model=model, mechanism="censor-uw", epsilon=4.0,
                             bounds=(-4.0, 6.0), seed=5, sampler=Sampler(2, 300, 300))  # fmt: skip
        outs.append(rel)
        mu = rel.confidential.fit.stan_fit.draws["mu"]
        assert not np.any((mu > 0.9) & (mu < 1.1))
    a, b = (o.report["if_unseeded"] for o in outs)
    assert a["guarantee"] == b["guarantee"] == "DP"
    assert set(outs[0].report) == set(outs[1].report)


def test_exception_lines_count_the_outermost_statement():
    """Stan's location trace, innermost first (httpstan's logger text and CmdStan's console
    line have the same form); only line numbers are kept."""
    from dpsynth.engine.common import exception_lines

    trace = (
        "Exception: Exception: poisson_lpmf: Rate parameter is -0.07, but must be nonnegative! "
        "(in '/tmp/m.stan', line 4, column 4 to column 33) "
        "(in '/tmp/m.stan', line 12, column 4 to column 34)"
    )
    texts = [
        "Informational Message: The current Metropolis proposal is about to be rejected",
        trace,
        trace,
        "Exception: normal_lpdf: Scale parameter is 0 (in 'm.stan', line 9, column 2 to column 9)",
        "Iteration: 100 / 200 [ 50%]  (Sampling)",
    ]
    assert exception_lines(texts) == {12: 2, 9: 1}


@pytest.mark.slow
def test_non_finite_terms_are_clamped(tmp_path, stan_backend):
    """The proof's claim that the clamp bounds non-finite terms too: a record function that
    returns -inf, +inf or NaN gives contrib -M, M and -M (Stan's fmax returns the other
    argument for NaN) and a finite target."""
    text = _with(
        "return normal_lpdf(y | mu, 1);",
        "if (y > 5) return not_a_number();\n"
        "    if (y > 4) return positive_infinity();\n"
        "    if (y < -4) return negative_infinity();\n"
        "    return normal_lpdf(y | mu, 1);",
    )
    path = tmp_path / "non_finite.pieces"
    path.write_text(text)
    model = pieces.from_pieces(path)
    y = np.array([0.0, 6.0, 4.5, -4.5])
    data = stan_data(model, y, np.ones(4), censor_bound=0.5, want_contrib=True)
    data = model.fit_inputs(data, bounds=(-5.0, 6.0))  # each record's nearest grid outcome
    out = engine.outputs_at(model.stan_file, data, [{"mu": 0.0}])[0]
    np.testing.assert_allclose(out["contrib"], [-0.5, -0.5, 0.5, -0.5])
    target = engine.log_density(model.stan_file, data, [{"mu": 0.0}])
    assert np.isfinite(target).all()


# ----------------------------------------------------------------------------- one path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lognormal", "poisson"])
def test_pieces_version_has_the_shipped_target(name, stan_backend):
    """The pieces version's target equals the shipped program's at the same parameters
    (both priors written with ~, so the same constants dropped), censored and not."""
    shipped = MODELS[name]
    model = pieces.from_pieces(EXAMPLES / f"{name}.pieces")
    rng = np.random.default_rng(16)
    if name == "lognormal":  # on the public grid (step 0.01 from 0 to 10): no snapping
        y, bounds = np.round(rng.lognormal(-1.0, 0.5, 40), 2).clip(0.01, None), (0.0, 10.0)
        params = [{"mu": -1.0, "sigma": 0.5}, {"mu": 0.3, "sigma": 2.0}]
    else:
        y, bounds = rng.poisson(3.0, 40), (0.0, 100.0)
        params = [
            {"beta": [b], "sigma_beta": [s], "L_beta": [[1.0]]} for b, s in ((1.1, 0.7), (0.2, 2.0))
        ]
    for M in (None, 0.8):
        data = stan_data(shipped, y, np.ones(y.size), censor_bound=M)
        expected = engine.log_density(shipped.stan_file, data, params)
        data_p = stan_data(model, y, np.ones(y.size), censor_bound=M)
        got = engine.log_density(model.stan_file, model.fit_inputs(data_p, bounds), params)
        np.testing.assert_allclose(got, expected, rtol=1e-9)


@pytest.mark.slow
def test_pieces_lognormal_gives_the_shipped_posterior(small_sampler, stan_backend):
    """Equal in distribution: same data, same seed, both programs; posterior means of mu and
    sigma within 0.15 posterior sd, and synthetic sets alike (two-sample KS, n = 2000)."""
    from scipy.stats import ks_2samp

    y = np.random.default_rng(17).lognormal(-1.0, 0.5, 100)
    shipped = Synthesizer(y, "lognormal", seed=4, sampler=small_sampler).unweighted()
    model = pieces.from_pieces(EXAMPLES / "lognormal.pieces")
    mine = Synthesizer(y, model, bounds=(0.0, 10.0), seed=4, sampler=small_sampler).unweighted()
    for p in ("mu", "sigma"):
        a, b = shipped.fit.stan_fit.draws[p], mine.fit.stan_fit.draws[p]
        assert abs(a.mean() - b.mean()) < 0.15 * a.std(), p
    draw = {k: v[0] for k, v in shipped.fit.stan_fit.draws.items()}
    data = stan_data(model, y, np.ones(y.size))
    rng = np.random.default_rng(18)
    ours = model.simulate(draw, data, 2000, rng)
    theirs = MODELS["lognormal"].simulate(draw, data, 2000, rng)
    assert ks_2samp(ours, theirs).pvalue > 0.001


@pytest.mark.slow
@pytest.mark.parametrize("name", ["normal_known_sd", "poisson"])
def test_dpsynths_assembly_passes_the_differential_checks(name, stan_backend):
    """The checks of whole programs, run on dpsynth's own assembled fit program (a test of
    the assembly, not the basis of its label): prior, locality, clamp and sum, with varied
    weights and centres, under add-remove (a record also removed)."""
    from dpsynth.models.program_checks import check_censored
    from dpsynth.models.synthesis import PLACEHOLDERS

    model = pieces.from_pieces(EXAMPLES / f"{name}.pieces")
    model = model.for_domain((0.0, 100.0) if name == "poisson" else (-10.0, 10.0))
    rng = np.random.default_rng(21)
    if name == "poisson":
        y = rng.poisson(3.0, 20)
        params = [{"beta": [b], "sigma_beta": [1.0], "L_beta": [[1.0]]} for b in (0.5, 1.5)]
    else:
        y = rng.normal(1.0, 1.0, 20)
        params = [{"mu": m} for m in (-1.0, 0.5, 3.0)]
    data = stan_data(model, y, rng.uniform(0.2, 1.0, y.size), censor_bound=0.8,
                     centre=rng.normal(0.0, 0.1, y.size))  # fmt: skip
    check_censored(
        model.stan_file, data, params, 0.8, records=(0, 10, 19),
        values=PLACEHOLDERS[model.outcome], subsets=8, outcome=model.outcome,
        neighbours="add-remove", inputs=model.fit_inputs,
    )  # fmt: skip


# ----------------------------------------------------------------------------- the CLI


@pytest.mark.slow
def test_cli_releases_an_honest_pieces_model_as_dp(tmp_path, capfd, stan_backend):
    y = _normal_data(19)
    inp = tmp_path / "in.csv"
    pd.DataFrame({"y": y}).to_csv(inp, index=False)
    # not --quiet: nothing confidential on stderr even so
    argv = [
        "synthesize", str(inp), "--column", "y", "--pieces", str(NORMAL),
        "--mechanism", "censor-uw", "--epsilon", "8", "--bounds", "-4", "6",
        "--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json"),
        "--diagnostics", str(tmp_path / "d.json"),
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["guarantee"] == "DP" and "pieces_checks" in report
    err = capfd.readouterr().err
    assert not any(f"{v:.4f}" in err or f"{v:.6g}" in err for v in y)


@pytest.mark.slow
def test_cli_releases_whether_or_not_a_record_lies_in_a_raising_window(
    tmp_path, capfd, stan_backend
):
    """The window trap through the CLI with a budget file, on a database and on its
    neighbour with a record in the window: exit 0 both times, the same public report keys
    and guarantee, each attempt in its ledger as released, no data value on the terminal."""
    from dpsynth.privacy import budget

    y = _normal_data()
    trap = tmp_path / "window.pieces"
    trap.write_text(WINDOW_TRAP)
    reports = []
    for k, value in enumerate((y[0], 2.55)):
        ledger = tmp_path / f"budget{k}.jsonl"  # one ledger per dataset
        data = y.copy()
        data[0] = value
        inp = tmp_path / f"in{k}.csv"
        pd.DataFrame({"y": data}).to_csv(inp, index=False)
        argv = [
            "synthesize", str(inp), "--column", "y", "--pieces", str(trap), "--mechanism",
            "censor-uw", "--epsilon", "4", "--bounds", "-4", "6", "--chains", "2",
            "--iter-warmup", "300", "--iter-sampling", "300", "--out", str(tmp_path / f"o{k}.csv"),
            "--report", str(tmp_path / f"r{k}.json"), "--budget-file", str(ledger),
            "--budget-total", "10",
        ]  # fmt: skip
        assert main(argv) == 0
        reports.append(json.loads((tmp_path / f"r{k}.json").read_text()))
        err = capfd.readouterr().err
        assert not any(f"{v:.4f}" in err or f"{v:.6g}" in err for v in data)
        _, entries = budget.read_ledger(ledger)
        assert [x.get("outcome") for x in entries if "outcome" in x][-1] == "released"
    assert set(reports[0]) == set(reports[1])
    assert reports[0]["guarantee"] == reports[1]["guarantee"] == "DP"


def test_cli_refuses_pieces_naming_the_flag(tmp_path, capsys):
    inp = tmp_path / "in.csv"
    pd.DataFrame({"y": _normal_data(20)}).to_csv(inp, index=False)
    bad = tmp_path / "bad.pieces"
    bad.write_text(_with("mu ~ normal(0, 10);", "mu ~ normal(max(y), 1);"))
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = [
        "synthesize", str(inp), "--column", "y", "--pieces", str(bad), "--mechanism",
        "censor-uw", "--epsilon", "2", "--out", str(tmp_path / "o.csv"), "--report",
        str(tmp_path / "r.json"), "--diagnostics", str(tmp_path / "d.json"), "--quiet",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpsynth: error: --pieces: prior refers to")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


# ----------------------------------------------------------------------------- messages


@pytest.mark.slow
def test_print_in_a_whole_program_never_reaches_the_terminal(tmp_path, capfd, stan_backend):
    """Not quiet, a whole program printing its data in transformed data: the fit holds
    confidential data, so Stan's own output is withheld whatever the verbosity."""
    text = (
        (TEST_STAN / "honest_normal.stan")
        .read_text()
        .replace(
            "vector[n] z = 0.5 * square(y);  // record by record",
            'vector[n] z = 0.5 * square(y);\n  print("LEAK ", y);',
        )
    )
    path = tmp_path / "prints.stan"
    path.write_text(text)
    y = np.array([1.23456789, 2.34567891, 3.45678912])
    data = {"n": 3, "alpha": np.ones(3), "censor": 0, "M": 0.0, "want_contrib": 0,
            "want_rep": 0, "y": y}  # fmt: skip
    engine.compile_program(path)
    capfd.readouterr()
    engine.fit(path, data, seed=1, chains=1, iter_warmup=50, iter_sampling=50, quiet=False)
    out, err = capfd.readouterr()
    assert "LEAK" not in out + err and "1.23456" not in out + err


def test_dropped_records_make_n_private_for_the_pieces(tmp_path):
    """With drop_missing the number of records kept is private (privacy.DROPPED_RECORDS_MAP),
    so a prior reading n is refused even under substitution, where n is otherwise public,
    in one line naming the piece, before any fit."""
    path = tmp_path / "reads_n.pieces"
    path.write_text(_with("mu ~ normal(0, 10);", "mu ~ normal(n, 0.01);"))
    model = pieces.from_pieces(path)  # fine under substitution: n is public there
    y = np.array([0.1, np.nan, 0.4, 0.2, np.nan, 0.3] * 5)
    with pytest.raises(InputError, match=r"^pieces: prior refers .*its own: n \(under add-remove"):
        synthesize(y, model=model, mechanism="censor-uw", epsilon=2.0, bounds=(-4, 6),
                   drop_missing=True, n_synthetic=30)  # fmt: skip
