"""The preflight of ``synthesize-table`` (dpsynth.table.preflight): the spec run on public data
(the spec's reference file, else a stand-in simulated from the spec) before the budget is
charged or a value of the confidential file is read."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli.commands import main
from dpsynth.formats import sha256
from dpsynth.privacy import budget
from dpsynth.sampler import Sampler
from dpsynth.table.preflight import (
    IDEAL_POOR_LIMIT,
    IDEAL_TRIALS,
    STAND_IN_MAX_RECORDS,
    STAND_IN_RECORDS,
    Preflight,
    ideal_poor_share,
    poor_verdict_note,
    preflight,
    public_figures,
    stand_in,
    stand_in_records,
)
from dpsynth.table.spec import load_spec

MODEL_SPEC = """
[[public]]
name = "age"
type = "continuous"
bounds = [16, 90]

[[confidential]]
name = "income"
model = "lognormal-regression"
bounds = [100, 50000]
"""
"""One censored model column: with 2 x (30 + 20) draws its fit cannot meet the convergence
policy (a bulk ESS of 100 from 40 draws), whatever the data."""
TOO_SHORT = ["--iter-warmup", "30", "--iter-sampling", "20"]

PH_SPEC = """
[[public]]
name = "age"
type = "continuous"
bounds = [16, 90]

[[confidential]]
name = "owner"
type = "binary"
mechanism = "ph"
levels = ["no", "yes"]
"""
"""A histogram column (no chains): it converges by construction."""


def _frame(n: int = 200, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.uniform(20, 60, n)
    return pd.DataFrame(
        {
            "age": age.round(1),
            "income": np.clip(np.exp(8 + 0.02 * (age - 40) + 0.4 * rng.normal(size=n)), 100, 5e4),
            "owner": rng.choice(["no", "yes"], n),
        }
    )


def _folder(tmp_path: Path, spec: str, reference: bool) -> tuple[Path, Path]:
    """DATA.csv and the spec (naming ``ref.csv``, a public file, when ``reference``)."""
    data = tmp_path / "data.csv"
    _frame(seed=3).to_csv(data, index=False)
    if reference:
        _frame(seed=4).to_csv(tmp_path / "ref.csv", index=False)
        spec = f'reference = "{tmp_path / "ref.csv"}"\n' + spec
    (tmp_path / "spec.toml").write_text(spec)
    return data, tmp_path / "spec.toml"


def _argv(tmp_path: Path, data: Path, spec: Path, *extra: str) -> list[str]:
    argv = ["synthesize-table", str(data), "--spec", str(spec), "--epsilon", "4"]
    argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    return [*argv, "--budget-file", str(tmp_path / "budget.jsonl"), *extra]


def _ledger(tmp_path: Path, data: Path) -> bytes:
    """A budget file with one earlier release of DATA.csv (cap 20, 1 spent): its bytes."""
    path = tmp_path / "budget.jsonl"
    with budget.attempt(budget.charge(path, dataset_sha256=sha256(data), epsilon=1.0,
                                      what="earlier", total=20.0)):  # fmt: skip
        pass
    return path.read_bytes()


def test_a_spec_that_converges_passes_then_the_release_is_made(tmp_path, capsys):
    """On the reference: the ok line (public figures, the time), then the release, charged once."""
    data, spec = _folder(tmp_path, PH_SPEC, reference=True)
    assert main(_argv(tmp_path, data, spec, "--budget-total", "10")) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "ok in" in x)
    assert line.startswith("[dpsynth] preflight on the public reference (200 records): ok in ")
    assert "table verdict" in line and line.endswith("(public figures)")
    assert err.index("ok in") < err.index("[dpsynth] wrote")
    assert budget.summary(tmp_path / "budget.jsonl")["spent"] == pytest.approx(4.0)
    assert len(pd.read_csv(tmp_path / "o.csv")) == 200


def test_a_column_that_cannot_converge_is_refused_before_the_charge(tmp_path, capsys):
    """Refused in one line naming the column and what to change, exit 2: the budget file
    untouched, nothing written."""
    data, spec = _folder(tmp_path, MODEL_SPEC, reference=True)
    before = _ledger(tmp_path, data)
    assert main(_argv(tmp_path, data, spec, *TOO_SHORT, "--quiet")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("dpsynth: error: --spec: preflight on the public reference (200 records")
    assert "column 'income': the MCMC fit did not converge" in err
    assert "--skip-preflight" in err and "nothing was charged or written" in err
    assert "CONFIDENTIAL" not in err and "public figures" in err and "iter_warmup" not in err
    assert (tmp_path / "budget.jsonl").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "budget.jsonl", "data.csv", "ref.csv", "spec.toml"]  # fmt: skip


def test_skip_preflight_releases_without_it(tmp_path, capsys):
    """--skip-preflight: no preflight, the release is made (its confidential verdict poor)."""
    data, spec = _folder(tmp_path, MODEL_SPEC, reference=True)
    argv = _argv(tmp_path, data, spec, *TOO_SHORT, "--budget-total", "10", "--skip-preflight")
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "[dpsynth] preflight" not in err and "table verdict poor" in err
    assert json.loads((tmp_path / "r.json").read_text())["epsilon"] == pytest.approx(4.0)


def test_without_a_reference_a_stand_in_never_reads_the_values(tmp_path, capsys):
    """No reference: the spec runs on a stand-in of DATA.csv's record count, simulated from the
    spec; values that could not be read as the spec's (garbage after the header) are not read
    by it. Its unconverged column is told on the preflight's line, not refused (a stand-in's
    fits are weaker than the data's); the release then meets the garbage and is refused."""
    data, spec = _folder(tmp_path, MODEL_SPEC, reference=False)
    data.write_text("age,income\n" + "not a number,\x01garbage\n" * 150)
    assert main(_argv(tmp_path, data, spec, *TOO_SHORT, "--budget-total", "10")) == 2
    err = capsys.readouterr().err
    assert "[dpsynth] preflight: running the spec on a public stand-in first" in err
    line = next((x for x in err.splitlines() if "on a public stand-in (150 records)" in x), None)
    assert line is not None, err  # the whole stderr when the line is missing
    assert "ok in" in line and "0 of 1 fit(s) converged" in line
    assert "but on the stand-in column 'income'" in line and "iter_warmup" not in line
    last = err.splitlines()[-1]
    assert last.startswith("dpsynth: error:") and "preflight" not in last  # the data's error
    assert not (tmp_path / "o.csv").exists()


def test_a_stand_in_preflight_passes_a_histogram_column():
    """The library: without a reference the preflight runs on a stand-in and judges only
    convergence (no verdict)."""
    result = preflight(load_spec(tomllib.loads(PH_SPEC)), 2.0, m=1, n=80)
    assert result.ok and result.source == "stand-in" and result.n_records == 80
    assert result.verdict is None and result.converged == {"owner": None}
    assert result.summary().startswith("preflight on a public stand-in (80 records): ok in ")


def test_a_stand_in_preflight_of_a_model_column_reports_its_fit():
    """A model column on the stand-in: its fit's convergence per column, the time; an
    unconverged fit there is a warning, not a refusal."""
    short = Sampler(iter_warmup=30, iter_sampling=20)
    result = preflight(tomllib.loads(MODEL_SPEC), 6.0, m=1, sampler=short, n=120)
    assert result.converged == {"income": False} and result.ok and result.refusal is None
    assert result.warning.startswith("column 'income': the MCMC fit did not converge")
    assert result.seconds > 0


def test_the_stand_in_is_drawn_within_the_spec():
    raw = tomllib.loads(MODEL_SPEC)
    raw["public"].append({"name": "region", "type": "categorical"})  # no levels: placeholders
    raw["confidential"] += tomllib.loads(PH_SPEC)["confidential"]
    raw["confidential"].append({"name": "kids", "model": "poisson", "bounds": [0, 6]})
    frame = stand_in(load_spec(raw), 500, np.random.default_rng(1))
    assert list(frame.columns) == ["age", "region", "income", "owner", "kids"]
    assert frame["age"].between(16, 90).all() and frame["income"].between(100, 50000).all()
    assert set(frame["owner"]) == {"no", "yes"} and frame["region"].nunique() == 2
    assert frame["kids"].between(0, 6).all() and (frame["kids"] % 1 == 0).all()
    assert not frame.isna().any().any()
    assert stand_in_records(None) == STAND_IN_RECORDS
    # drawn at the clip (a few in 10^5), a log model's exp(log 50000) exceeded 50000 by a rounding
    wide = stand_in(load_spec(tomllib.loads(MODEL_SPEC)), 200_000, np.random.default_rng(0))
    assert wide["income"].max() == 50000 and wide["income"].min() >= 100
    assert stand_in_records(10**9) == STAND_IN_MAX_RECORDS and stand_in_records(37) == 37


def test_a_poor_verdict_on_the_reference_names_its_columns_and_the_next_step():
    verdict = {
        "verdict": "poor",
        "driven_by": {"figure": "mean_error", "value": 0.359, "columns": ["spend"]},
        "next_step": "raise the share of epsilon of 'spend'",
    }
    note = poor_verdict_note(verdict)
    assert note == (
        "column 'spend': the table verdict there is poor (mean_error 0.359); next: raise the "
        "share of epsilon of 'spend'"
    )
    refused = Preflight("reference", 300, 2.0, "poor", {"spend": True}, note)
    assert refused.summary() == f"preflight on the public reference (300 records), 2.0 s: {note}"
    assert "CONFIDENTIAL" not in public_figures(
        "x [CONFIDENTIAL figures from the confidential fit, do not publish: max R-hat 2]"
    )


SPEND_SPEC = {
    "public": [{"name": "age", "type": "continuous", "bounds": [16, 90]}],
    "confidential": [
        {"name": "owner", "type": "binary", "mechanism": "ph", "levels": ["no", "yes"]},
        {
            "name": "spend",
            "type": "continuous",
            "mechanism": "ph",
            "bounds": [0, 100],
            "bins": 1000,
            "given": ["owner"],
        },
    ],
}
"""Two histogram columns (no chains, so the preflight takes seconds); the spend's thousand
bins at a small epsilon are mostly noise."""


def _spend_reference(tmp_path: Path, n: int) -> dict:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "age": rng.uniform(20, 60, n).round(1),
            "owner": rng.choice(["no", "yes"], n),
            "spend": np.clip(rng.normal(30, 3, n), 0, 100).round(2),
        }
    )
    frame.to_csv(tmp_path / "ref.csv", index=False)
    return {**SPEND_SPEC, "reference": str(tmp_path / "ref.csv")}


def test_an_ideal_synthesis_of_a_tiny_reference_is_rated_poor_and_of_a_large_one_is_not(tmp_path):
    """The null the preflight judges a poor verdict against: one bootstrap sample of the
    reference against another (25 records: ten bins of a column cannot be told apart)."""
    spec = load_spec(_spend_reference(tmp_path, 25))
    frame = pd.read_csv(tmp_path / "ref.csv")
    assert ideal_poor_share(frame, spec, np.random.default_rng(0)) == 1.0
    spec = load_spec(_spend_reference(tmp_path, 3000))
    frame = pd.read_csv(tmp_path / "ref.csv")
    assert ideal_poor_share(frame, spec, np.random.default_rng(0)) == 0.0


def test_a_reference_too_small_to_judge_the_verdict_is_told_not_refused(tmp_path):
    result = preflight(_spend_reference(tmp_path, 25), 4.0)
    assert result.ok and result.verdict == "poor"
    assert result.ideal_poor is not None and result.ideal_poor >= IDEAL_POOR_LIMIT
    assert f"as was an ideal synthesis of it in {result.ideal_poor:.0%} of {IDEAL_TRIALS}" in (
        result.summary()
    )
    assert "too small to judge the verdict, so only convergence was checked" in result.summary()


def test_a_poor_verdict_on_a_reference_that_can_judge_it_still_refuses(tmp_path):
    result = preflight(_spend_reference(tmp_path, 3000), 0.2)
    assert not result.ok and result.verdict == "poor"
    assert result.ideal_poor is not None and result.ideal_poor < IDEAL_POOR_LIMIT
    assert "the table verdict there is poor" in result.refusal
    assert result.summary().endswith(
        f"(an ideal synthesis of the reference was rated poor in {result.ideal_poor:.0%} of "
        f"{IDEAL_TRIALS} trials: at its size most ideal syntheses are not)"
    )


class _PublicRuns:
    """A stand-in for the preflight's public release (no Stan): chains in different modes
    for 'income' unless its weights are "auto" and ``rescued``; records each spec run."""

    def __init__(self, rescued: bool) -> None:
        self.rescued, self.specs = rescued, []

    def __call__(self, spec, *run):
        from dpsynth.engine.diagnostics import convergence_note
        from dpsynth.table.pipeline import table_convergence_note

        self.specs.append(spec)
        income = next(c for c in spec.confidential if c.name == "income")
        if income.downscale == "auto" and self.rescued:
            mcmc = {"rhat_max": 1.002, "ess_bulk_min": 900.0, "divergences": 0}
            verdict = {"verdict": "fair", "reasons": []}
        else:
            mcmc = {"rhat_max": 1.5, "ess_bulk_min": 4.0, "divergences": 0}
            note = table_convergence_note(convergence_note(mcmc), "income", reference=True)
            verdict = {"verdict": "poor", "converged": False, "convergence": [note]}
        diagnostics = {"columns": {"income": {"mcmc": mcmc}}, "verdict": verdict}
        return type("Release", (), {"diagnostics": diagnostics})()


@pytest.mark.parametrize("rescued", [True, False])
def test_a_fit_that_misses_the_policy_on_the_reference_is_tried_again_with_auto_weights(
    tmp_path, monkeypatch, rescued
):
    """A censored column whose fit missed the convergence policy on the reference (here its
    chains settled in different modes) is run again with downscale = "auto": where it converges, the preflight passes, says so and
    hands the release that spec (the report names the rule); where not, the first refusal
    stands and says the second run did not help."""
    from dpsynth.table import preflight as module
    from dpsynth.table.pipeline import PREFLIGHT_DOWNSCALE_MEANING, _column_choices

    runs = _PublicRuns(rescued)
    monkeypatch.setattr(module, "_public_release", runs)
    _, path = _folder(tmp_path, MODEL_SPEC, reference=True)
    spec = load_spec(path)
    result = preflight(spec, 4.0)
    assert [s.confidential[0].downscale for s in runs.specs] == [1.0, "auto"]
    assert result.tried == ("income",)
    if rescued:
        assert result.ok and result.remedies == ("income",) and result.verdict == "fair"
        assert "column 'income' did not converge with the spec's weights" in (result.summary())
        used = result.applied_to(spec).confidential[0]
        assert used.downscale == "auto" and used.downscale_by_preflight
        assert _column_choices(used)["downscale_rule"] == PREFLIGHT_DOWNSCALE_MEANING
        assert "downscale_rule" not in _column_choices(spec.confidential[0])
    else:
        assert not result.ok and result.remedies == ()
        assert "column 'income': the MCMC fit did not converge" in result.refusal
        assert "a second run with downscale = \"auto\" on column 'income' did not bring" in (
            result.summary()
        )
        assert result.summary().count('downscale = "auto"') == 1  # tried: no longer advised
        assert result.applied_to(spec) is spec


def test_only_an_unconverged_censored_fit_without_auto_weights_is_tried_again(tmp_path):
    """A slow fit or chains in different modes, yes; a converged fit, a column whose weights
    are "auto" already, or a column the spec does not fit with weights (an indicator), no."""
    from dpsynth.table.preflight import remedied, unconverged_columns

    _, path = _folder(tmp_path, MODEL_SPEC, reference=True)
    spec = load_spec(path)
    split = {"rhat_max": 1.5, "ess_bulk_min": 4.0, "divergences": 0}
    slow = {"rhat_max": 1.05, "ess_bulk_min": 60.0, "divergences": 0}
    fine = {"rhat_max": 1.001, "ess_bulk_min": 900.0, "divergences": 0}
    for mcmc, expected in ((split, ("income",)), (slow, ("income",)), (fine, ())):
        assert unconverged_columns({"columns": {"income": {"mcmc": mcmc}}}, spec) == expected
    auto = remedied(spec, ("income",))
    assert unconverged_columns({"columns": {"income": {"mcmc": split}}}, auto) == ()
    assert unconverged_columns({"columns": {"income_missing": {"mcmc": split}}}, spec) == ()


def test_the_release_runs_the_spec_the_preflight_remedied(tmp_path, monkeypatch, capsys):
    """synthesize-table releases with the preflight's remedy: the public report names the
    rule that set the column's weights, and the terminal says why."""
    from dpsynth.table import preflight as module
    from dpsynth.table.pipeline import PREFLIGHT_DOWNSCALE_MEANING

    monkeypatch.setattr(module, "_public_release", _PublicRuns(rescued=True))
    data, spec = _folder(tmp_path, MODEL_SPEC, reference=True)
    assert main(_argv(tmp_path, data, spec, "--budget-total", "10")) == 0
    assert 'converged with downscale = "auto", which the release uses' in capsys.readouterr().err
    report = json.loads((tmp_path / "r.json").read_text())
    income = next(c for c in report["confidential_columns"] if c["column"] == "income")
    assert income["downscale_rule"] == PREFLIGHT_DOWNSCALE_MEANING
