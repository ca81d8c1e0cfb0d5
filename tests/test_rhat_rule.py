"""The R-hat rule tied to the bulk ESS (:func:`dpsynth.engine.diagnostics.rhat_limit`).

Known answers for the limit, and its false-refusal rate and power on chains whose truth is
known (stationary AR(1) chains; one chain shifted), with fixed seeds and stated tolerances.
"""

import numpy as np
import pytest
from scipy.signal import lfilter
from scipy.stats import chi2

from dpsynth import engine
from dpsynth.engine import diagnostics
from dpsynth.engine.diagnostics import CONVERGENCE, converged, convergence_failures, rhat_limit


def test_limit_known_answers():
    # 2 chains -> 4 split chains: (R-hat - 1) x ESS ~ (2/3) chi2(3); one parameter: 1 % tail
    c1 = 2 / 3 * chi2.isf(0.01, 3)
    assert rhat_limit(100.0, 1, 2) == pytest.approx(1 + c1 / 100, rel=1e-12)
    assert rhat_limit(5000.0, 1, 2) == CONVERGENCE["rhat_max"]  # the fixed floor
    c25 = 2 / 3 * chi2.isf(0.01 / 25, 3)
    assert rhat_limit(200.0, 25, 2) == pytest.approx(1 + c25 / 200, rel=1e-12)
    c4 = 8 / 14 * chi2.isf(0.01, 7)  # 4 chains -> 8 split chains
    assert rhat_limit(100.0, 1, 4) == pytest.approx(1 + c4 / 100, rel=1e-12)
    assert rhat_limit(float("nan"), 5, 2) == CONVERGENCE["rhat_max"]


def test_limit_is_monotone_and_never_below_the_floor():
    esss = [20.0, 50.0, 100.0, 400.0, 1000.0, 10_000.0]
    for k in (1, 5, 25, 40):
        limits = [rhat_limit(e, k, 2) for e in esss]
        assert all(a >= b for a, b in zip(limits, limits[1:], strict=False))
        assert min(limits) >= CONVERGENCE["rhat_max"]
    assert rhat_limit(100.0, 40, 2) > rhat_limit(100.0, 5, 2)


def test_converged_reads_the_excess():
    base = {"rhat_max": 1.03, "ess_bulk_min": 300.0, "divergences": 0}
    assert converged({**base, "rhat_excess": -0.004, "rhat_limit": 1.04})
    assert not converged({**base, "rhat_excess": 0.002, "rhat_limit": 1.028})
    assert not converged(base)  # no excess recorded: the fixed 1.01
    assert converged({**base, "rhat_max": 1.008})
    said = convergence_failures({**base, "rhat_excess": 0.002, "rhat_limit": 1.028})
    assert said == ["R-hat 1.0300 > its limit 1.0280 (max R-hat 1.0300)"]


def _chains(rng, k, n, phi, delta=0.0):
    e = rng.standard_normal((k, 2, n))
    e[..., 0] /= np.sqrt(1 - phi**2)
    x = lfilter([1.0], [1.0, -phi], e, axis=-1)
    x[0, 1] += delta / np.sqrt(1 - phi**2)
    return x


def _refused(x) -> tuple[bool, bool]:
    """(the R-hat rule refuses, the fixed 1.01 refuses): the R-hat part alone."""
    diag = engine.convergence_diagnostics({f"b{i}": p for i, p in enumerate(x)})
    fixed = diag["rhat_max"] > CONVERGENCE["rhat_max"]
    return not diagnostics._rhat_ok(diag), fixed


def test_false_refusals_on_converged_chains_stay_near_the_level():
    """25 parameters, 2 chains of 1000 draws, lag-1 autocorrelation 0.8 (bulk ESS about 220):
    the rule is set for 1 % of such fits; 100 fits, at most 4 refused (a binomial(100, 0.01)
    exceeds 4 with probability 0.003). The fixed 1.01 refuses most of them (the reason for
    the rule; at least 50 of 100)."""
    rng = np.random.default_rng(7)
    out = np.array([_refused(_chains(rng, 25, 1000, 0.8)) for _ in range(100)])
    assert out[:, 0].sum() <= 4
    assert out[:, 1].sum() >= 50


def test_the_rule_catches_a_chain_stuck_elsewhere():
    """One of 25 parameters with its second chain one marginal sd away, 2 chains of 1000 draws
    at lag-1 autocorrelation 0.5: the R-hat limit alone (the floor on the bulk ESS aside)
    refuses at least 48 of 50 fits. Its ESS is the within-chain one, which the offset leaves
    alone, where the bulk ESS collapses and would loosen the limit."""
    rng = np.random.default_rng(8)
    out = np.array([_refused(_chains(rng, 25, 1000, 0.5, delta=1.0)) for _ in range(50)])
    assert out[:, 0].sum() >= 48


def test_within_chain_ess_ignores_an_offset_and_matches_bulk_without_one():
    """Invariants: on agreeing chains the within-chain ESS is the bulk ESS up to the
    between-chain term (within 15 %); shifting one chain leaves it within 1 % (the
    autocorrelation is of each chain about its own mean) while the bulk ESS drops."""
    rng = np.random.default_rng(9)
    x = _chains(rng, 1, 2000, 0.6)[0]
    within, bulk = diagnostics.ess_within(x), diagnostics.ess_bulk(x)
    assert within == pytest.approx(bulk, rel=0.15)
    shifted = x.copy()
    shifted[1] += 2.0
    assert diagnostics.ess_within(shifted) == pytest.approx(within, rel=0.05)
    assert diagnostics.ess_bulk(shifted) < 0.2 * bulk
