"""Whole tables (issue 29): the spec's refusals, the table release, the CLI commands."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli.commands import main
from dpsynth.errors import InputError
from dpsynth.models.catalogue import MODELS, get_model
from dpsynth.privacy import accounting, budget, relations
from dpsynth.sampler import Sampler
from dpsynth.table.columns import fit_model
from dpsynth.table.design import features
from dpsynth.table.pipeline import (
    TABLE_CONVERGENCE_ADVICE,
    TABLE_MULTIMODAL_ADVICE,
    synthesize_table,
)
from dpsynth.table.spec import CLAMP_DEFAULT, load_spec, parse_spec
from dpsynth.table.steps import rank_mapped

BASE = {
    "public": [
        {"name": "age", "type": "continuous", "bounds": [16, 90]},
        {"name": "region", "type": "categorical", "levels": ["n", "s", "e"]},
        {"name": "hours", "type": "continuous"},
    ],
    "confidential": [
        {"name": "income", "model": "lognormal-regression", "bounds": [100, 50000]},
        {"name": "spend", "model": "lognormal-regression", "bounds": [10, 20000]},
    ],
}


def _spec(**changes):
    spec = copy.deepcopy(BASE)
    for path, value in changes.items():
        role, i, key = path.split("__")
        spec[role][int(i)][key] = value
    return spec


GIVEN_COLUMN = {"name": "owner", "mechanism": "ph", "type": "binary", "levels": ["no", "yes"]}
"""A PH level column after the base spec's two regressions (for ``given``)."""

HOSTILE = [
    ("duplicate in the order", {"confidential": BASE["confidential"] * 2}, "confidential", "twice"),
    (
        "column in two roles",
        {**BASE, "public": BASE["public"] + [{"name": "income"}]},
        "confidential",
        "two roles",
    ),
    (
        "public twice",
        {**BASE, "public": BASE["public"] + BASE["public"][:1]},
        "public",
        "'age' appears twice",
    ),
    ("non-positive share", _spec(confidential__1__share=0), "share", "'spend'"),
    ("negative share", _spec(confidential__0__share=-1.5), "share", "'income'"),
    ("bounds missing", _spec(confidential__0__bounds=None), "bounds", "needs public bounds"),
    ("bad bounds", _spec(confidential__0__bounds=[5, 5]), "bounds", "lo < hi"),
    ("categorical without levels", _spec(confidential__1__model="categorical"), "bounds", "levels"),
    ("unknown model", _spec(confidential__0__model="lognormal"), "model", "'income'"),
    (
        "ph after a column, continuous",
        _spec(confidential__1__mechanism="ph", confidential__1__model=None),
        "mechanism",
        "needs a model",
    ),
    ("censor-w without reference", _spec(confidential__0__mechanism="censor-w"), "mechanism", ""),
    ("unknown key", _spec(confidential__0__colour="red"), "confidential column 'income'", ""),
    ("bad missing", _spec(confidential__0__missing="impute"), "missing", "'income'"),
    ("add-remove", {**BASE, "neighbours": "add-remove"}, "neighbours", "substitution"),
    ("no confidential", {"public": BASE["public"], "confidential": []}, "confidential", ""),
    ("analysis names no column", {**BASE, "analysis": {"formula": "spend ~ wage"}}, "analysis", ""),
    ("design unknown", _spec(confidential__0__design="ordinal"), "design", "linear, quadratic"),
    (
        "design quadratic on a categorical column",
        _spec(
            confidential__1__model="categorical",
            confidential__1__levels=["a", "b"],
            confidential__1__bounds=None,
            confidential__1__design="quadratic",
        ),
        "design",
        "one-hot, number",
    ),
    (
        "design number on text levels",
        _spec(
            confidential__1__model="categorical",
            confidential__1__levels=["a", "b"],
            confidential__1__bounds=None,
            confidential__1__design="number",
        ),
        "design",
        "levels are numbers",
    ),
    ("design number on a continuous column", _spec(confidential__0__design="number"), "design", ""),
    ("downscale zero", _spec(confidential__0__downscale=0), "downscale", "'income'"),
    ("downscale above one", _spec(confidential__0__downscale=1.5), "downscale", "(0, 1]"),
    ("downscale true", _spec(confidential__1__downscale=True), "downscale", "got True"),
    ("downscale text", _spec(confidential__1__downscale="half"), "downscale", '"auto"'),
    ("debias not a bool", _spec(confidential__0__debias="yes"), "debias", "'income'"),
    ("clamp unknown", _spec(confidential__0__clamp="soft"), "clamp", "hard, smooth"),
    ("clamp a list", _spec(confidential__0__clamp=["hard"]), "clamp", "got ['hard']"),
    ("model a list", _spec(confidential__0__model=["logistic"]), "model", "got ['logistic']"),
    (
        "clamp on a ph column",
        {**BASE, "confidential": [*BASE["confidential"], {**GIVEN_COLUMN, "clamp": "smooth"}]},
        "clamp",
        "no likelihood to clamp",
    ),
    (
        "debias on a ph column",
        {**BASE, "confidential": [*BASE["confidential"], {**GIVEN_COLUMN, "debias": True}]},
        "debias",
        "censor-uw continuous or count",
    ),
    (
        "downscale on a ph column",
        {**BASE, "confidential": [*BASE["confidential"], {**GIVEN_COLUMN, "downscale": 0.5}]},
        "downscale",
        "no weights",
    ),
    ("fit_records zero", {**BASE, "fit_records": 0}, "fit_records", "at least 100"),
    ("fit_records fraction", {**BASE, "fit_records": 0.5}, "fit_records", "whole number"),
    ("fit_records true", {**BASE, "fit_records": True}, "fit_records", "got True"),
    ("fit_records text", {**BASE, "fit_records": "most"}, "fit_records", 'or "all"'),
    ("calibrate_bins one", _spec(confidential__1__calibrate_bins=1), "calibrate_bins", "2 to"),
    ("calibrate_bins true", _spec(confidential__1__calibrate_bins=True), "calibrate_bins", "True"),
    ("calibrate_bins float", _spec(confidential__1__calibrate_bins=2.5), "calibrate_bins", "2.5"),
    (
        "calibrate_dispersion on a log-normal column",
        _spec(confidential__1__calibrate_bins=20, confidential__1__calibrate_dispersion=False),
        "calibrate_dispersion",
        "only a calibrated beta-regression",
    ),
    (
        "calibrate_dispersion without calibration",
        _spec(
            confidential__1__model="beta-regression",
            confidential__1__calibrate_bins=0,
            confidential__1__calibrate_dispersion=True,
        ),
        "calibrate_dispersion",
        "needs calibrate_bins",
    ),
    (
        "calibrate_dispersion text",
        _spec(confidential__1__model="beta-regression", confidential__1__calibrate_dispersion="y"),
        "calibrate_dispersion",
        "true or false",
    ),
    (
        "calibrate_bins on a ph column",
        _spec(
            confidential__0__mechanism="ph",
            confidential__0__model=None,
            confidential__0__calibrate_bins=20,
        ),
        "calibrate_bins",
        "continuous or count column with a model",
    ),  # fmt: skip
    (
        "calibrate_bins on a ph column",
        _spec(
            confidential__1__mechanism="ph",
            confidential__1__model=None,
            confidential__1__type="continuous",
            confidential__1__calibrate_bins=20,
        ),  # fmt: skip
        "calibrate_bins",
        "continuous or count column with a model",
    ),
    ("given on a model column", _spec(confidential__1__given=["income"]), "given", "ph level"),
    (
        "continuous ph after others without given",
        {
            **BASE,
            "confidential": [
                *BASE["confidential"],
                {"name": "x", "mechanism": "ph", "bounds": [0, 1]},
            ],
        },
        "mechanism",
        "with given",
    ),  # fmt: skip
    *[
        (
            f"given {case}",
            {**BASE, "confidential": [*BASE["confidential"], {**GIVEN_COLUMN, **change}]},
            param,
            words,
        )
        for case, change, param, words in [
            (
                "names a public column without levels",
                {"given": ["age"]},
                "given",
                "(these are: region, income, spend)",
            ),
            ("bins on a level column", {"bins": 5}, "bins", "continuous ph"),
            (
                "bins zero",
                {"type": "continuous", "levels": None, "bounds": [0, 1], "bins": 0},
                "bins",
                "2 to",
            ),
            ("names itself", {"given": ["owner"]}, "given", "'owner' is neither"),
            ("twice", {"given": ["income", "income"]}, "given", "distinct"),
            ("not a list", {"given": "income"}, "given", "list"),
            ("bins without given", {"given_bins": 5}, "given_bins", "needs given"),
            ("bins one", {"given": ["income"], "given_bins": 1}, "given_bins", "2 to"),
            ("bins text", {"given": ["income"], "given_bins": "ten"}, "given_bins", "'ten'"),
        ]
    ],
    (
        "given a column after it",
        {**BASE, "confidential": [{**GIVEN_COLUMN, "given": ["income"]}, *BASE["confidential"]]},
        "given",
        "(these are: region)",
    ),
    (
        "calibrate_share without a histogram",
        _spec(
            confidential__1__calibrate_bins=0,
            confidential__1__calibrate_share=0.5,
            confidential__1__centring="none",
        ),  # fmt: skip
        "calibrate_share",
        'needs calibrate_bins, centring = "marginal" or a ph mechanism',
    ),
    (
        "calibrate_share on a ph column without parents",
        {
            **BASE,
            "confidential": [
                *BASE["confidential"],
                {**GIVEN_COLUMN, "given": [], "calibrate_share": 0.5},
            ],
        },
        "calibrate_share",
        "'owner': a ph column is calibrated only when drawn given others",
    ),
    (
        "calibrate_share zero on a ph column",
        {
            **BASE,
            "confidential": [
                *BASE["confidential"],
                {**GIVEN_COLUMN, "given": ["income"], "calibrate_share": 0},
            ],
        },
        "calibrate_share",
        "between 0 and 1",
    ),
    (
        "calibrate_share one",
        _spec(confidential__1__calibrate_bins=20, confidential__1__calibrate_share=1),
        "calibrate_share",
        "between 0 and 1",
    ),
    (
        "calibrate_share text",
        _spec(confidential__1__calibrate_bins=20, confidential__1__calibrate_share="half"),
        "calibrate_share",
        "'half'",
    ),
    ("missing level on a model column", _spec(confidential__1__missing="level"), "missing", "ph"),
    (
        "missing level on a continuous ph column",
        _spec(
            confidential__0__mechanism="ph",
            confidential__0__model=None,
            confidential__0__missing="level",
        ),
        "missing",
        "binary or categorical",
    ),  # fmt: skip
    (
        "missing level named by the spec",
        {
            **BASE,
            "confidential": [{**GIVEN_COLUMN, "levels": ["no", "<missing>"], "missing": "level"}],
        },
        "levels",
        "the missing level",
    ),  # fmt: skip
]


def _clean(spec):
    """Drop keys set to None by :func:`_spec` (TOML has no null)."""
    for role in ("public", "confidential"):
        spec[role] = [{k: v for k, v in e.items() if v is not None} for e in spec.get(role, [])]
    return spec


@pytest.mark.parametrize(("case", "spec", "param", "words"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_spec_refused_in_one_line(case, spec, param, words):
    with pytest.raises(InputError) as info:
        parse_spec(_clean(copy.deepcopy(spec)))
    assert info.value.param == param
    assert words in str(info.value) and "\n" not in str(info.value)


def test_spec_error_comes_before_the_data():
    """A bad spec is refused before the frame is looked at (here: not even a frame)."""
    with pytest.raises(InputError) as info:
        synthesize_table(None, _clean(_spec(confidential__1__share=0)), 1.0)
    assert info.value.param == "share"


def test_missing_column_lists_the_columns():
    frame = pd.DataFrame({"age": [20.0], "region": ["n"], "hours": [1.0], "income": [200.0]})
    with pytest.raises(InputError, match=r"no column\(s\) 'spend'.*'age', 'region'") as info:
        synthesize_table(frame, _clean(_spec()), 1.0)
    assert info.value.param == "data"


def test_shares_normalised_and_indicator_halves_its_column():
    spec = _clean(_spec(confidential__0__share=3, confidential__1__share=1))
    spec["confidential"][1]["missing"] = "indicator"
    order = load_spec(spec).order()
    assert [c.name for c in order] == ["income", "spend_missing", "spend"]
    assert [c.share for c in order] == pytest.approx([0.75, 0.125, 0.125])


def test_example_spec_parses():
    spec = load_spec(Path(__file__).parents[1] / "examples" / "table_spec.toml")
    assert [c.name for c in spec.order()] == ["income", "owns_home", "expenditure"]
    assert spec.analysis.predictors == ("income", "age")
    owns = spec.order()[1]
    assert owns.given == ("income",) and owns.given_bins == 10


def _write_spec(path: Path, spec: dict) -> Path:
    lines = []
    for key in ("neighbours", "reference"):
        if key in spec:
            lines.append(f"{key} = {json.dumps(spec[key])}")
    for role in ("public", "confidential"):
        for entry in spec.get(role, []):
            lines.append(f"[[{role}]]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("spec", "flag"),
    [
        (_spec(confidential__1__share=0), "--spec: share: column 'spend'"),
        (_spec(confidential__0__bounds=None), "--spec: bounds: column 'income'"),
        ({**BASE, "confidential": BASE["confidential"] * 2}, "--spec: confidential:"),
    ],
)
def test_cli_hostile_spec_exit_2_nothing_written(tmp_path, capsys, spec, flag):
    spec_file = _write_spec(tmp_path / "spec.toml", _clean(copy.deepcopy(spec)))
    out = tmp_path / "out.csv"
    argv = ["synthesize-table", str(tmp_path / "absent.csv"), "--spec", str(spec_file)]
    argv += ["--epsilon", "1", "--out", str(out), "--report", str(tmp_path / "r.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]


def test_cli_missing_data_column_exit_2(tmp_path, capsys):
    spec_file = _write_spec(tmp_path / "spec.toml", _clean(_spec()))
    data = tmp_path / "data.csv"
    data.write_text("age,region,hours,income\n20,n,1,200\n")
    argv = ["synthesize-table", str(data), "--spec", str(spec_file), "--epsilon", "1"]
    argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "DATA.csv: no column(s) 'spend'" in err and err.count("\n") == 1
    assert not (tmp_path / "o.csv").exists()


def test_cli_a_value_outside_the_spec_is_counted_only_under_the_confidential_banner(
    tmp_path, capsys
):
    """A confidential value outside its bounds: one line, exit 2, nothing written, the
    count and the first record's position inside the CONFIDENTIAL banner, never the value."""
    spec_file = _write_spec(tmp_path / "spec.toml", _clean(_spec()))
    data = tmp_path / "data.csv"
    frame = _table(n=20)
    frame.loc[[4, 9], "spend"] = 987654.0
    frame.to_csv(data, index=False)
    argv = ["synthesize-table", str(data), "--spec", str(spec_file), "--epsilon", "1"]
    argv += ["--skip-preflight"]  # about the data's check (tests/test_preflight.py: preflight)
    argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    banner = "[CONFIDENTIAL, from the data: 2 record(s), the first at record 5]"
    assert "column 'spend'" in err and banner in err and err.count("\n") == 1
    assert "987654" not in err and err.replace(banner, "").count("2 record") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "spec.toml"]


def test_cli_fits_show_their_progress_unless_quiet():
    """Without --quiet each fit's sampler reports its progress in tenths (a censored fit can
    take minutes); --quiet keeps every fit quiet, as it keeps the column lines off."""
    from dpsynth.cli.commands import build_parser
    from dpsynth.cli.options_table import keywords

    base = ["synthesize-table", "d.csv", "--spec", "s.toml", "--epsilon", "1"]
    base += ["--out", "o.csv", "--report", "r.json"]
    for extra, quiet in (([], False), (["--quiet"], True)):
        args = build_parser().parse_args(base + extra)
        assert Sampler(**keywords(args, args.command, "sampler")).quiet is quiet


def test_cli_adapt_delta_out_of_range_refused_before_the_budget(tmp_path, capsys):
    """--adapt-delta outside [0.5, 1): one line naming it, exit 2, no budget file made."""
    spec_file = _write_spec(tmp_path / "spec.toml", _clean(_spec()))
    data = tmp_path / "data.csv"
    _table(n=20).to_csv(data, index=False)
    argv = ["synthesize-table", str(data), "--spec", str(spec_file), "--epsilon", "1"]
    argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    argv += ["--adapt-delta", "1.5", "--budget-file", str(tmp_path / "b.jsonl")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpsynth: error: --adapt-delta: must lie in [0.5, 1)")
    assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "spec.toml"]


# ----------------------------------------------------------------------------- releases


def _table(n: int = 300, seed: int = 29) -> pd.DataFrame:
    """A table with strongly dependent confidential columns (corr of logs about 0.93)."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(20, 60, n)
    income = np.clip(np.exp(8 + 0.02 * (age - 40) + 0.5 * rng.normal(size=n)), 100, 50000)
    spend = np.clip(np.exp(np.log(income) - 1 + 0.2 * rng.normal(size=n)), 10, 20000)
    hours = np.where(rng.uniform(size=n) < 0.05, np.nan, rng.uniform(10, 50, n).round())
    region = rng.choice(["n", "s", "e"], n)
    return pd.DataFrame(
        {"age": age, "region": region, "hours": hours, "income": income, "spend": spend}
    )


LONG_CHAINS = Sampler(chains=4, iter_warmup=2000, iter_sampling=3000)
"""The income column (all records censored at some draw) mixes slowly. Its max R-hat, seeds
7-10: 1.0072 with the table's default 2 x (1000 + 2000) (bulk ESS 451), 1.0035-1.0076 with
4 x (1000 + 2000), 1.0037-1.0043 (seeds 7-9) with these 4 x (2000 + 3000): a margin below
the release's gate (1.01) for a machine whose floating point differs."""


@pytest.fixture(scope="module")
def released():
    frame = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, _clean(_spec()), 6.0, seed=7, sampler=LONG_CHAINS)
    return frame, rel


@pytest.mark.slow
def test_report_epsilon_is_the_sum_of_the_columns(released):
    _, rel = released
    per = rel.report["epsilon_per_column"]
    assert per == pytest.approx({"income": 3.0, "spend": 3.0})
    assert rel.report["if_unseeded"]["epsilon"] == pytest.approx(sum(per.values()))
    assert rel.report["guarantee"] == "not private (known seed)"
    assert [c["guarantee"] for c in rel.report["confidential_columns"]] == [
        "not private (known seed)"
    ] * 2
    assert rel.report["confidential_columns"][1]["predecessors"] == ["income"]


@pytest.mark.slow
def test_public_columns_copied_confidential_synthetic(released):
    frame, rel = released
    pd.testing.assert_frame_equal(
        rel.data[["age", "region", "hours"]], frame[["age", "region", "hours"]]
    )
    conf = ["income", "spend"]
    same = np.isclose(rel.data[conf].to_numpy(), frame[conf].to_numpy(), rtol=1e-9).all(axis=1)
    assert same.sum() == 0
    assert (
        rel.data["income"].between(100, 50000).all() and rel.data["spend"].between(10, 20000).all()
    )


@pytest.mark.slow
def test_dependence_between_confidential_columns_kept(released):
    """corr(log income, log spend) about 0.93 in the data; kept within 0.15 at epsilon 6."""
    frame, rel = released
    real = np.corrcoef(np.log(frame["income"]), np.log(frame["spend"]))[0, 1]
    syn = np.corrcoef(np.log(rel.data["income"]), np.log(rel.data["spend"]))[0, 1]
    assert real > 0.85
    assert abs(syn - real) < 0.15


@pytest.mark.slow
def test_first_column_is_the_one_column_release(released):
    """The column's published draws at the fitted design, through its public debias step
    (no centre, its bound M, d = 1, the table's 300 records: ``debias`` is on by default),
    give the table's own records; without the step, other records (the uncorrected draw)."""
    from dpsynth.models import synthesis
    from dpsynth.models.catalogue import PublicDesign
    from dpsynth.models.debias import Censoring
    from dpsynth.table.steps import Debiased

    _, rel = released
    result = rel.confidential["income"]
    X = result.fit.data["X"][:, 1:]
    seed = rel.diagnostics["columns"]["income"]["seed"]
    model, design = get_model("lognormal-regression"), [X.view(PublicDesign)]
    clamp = CLAMP_DEFAULT["lognormal-regression"]  # the column's clamp: the spec names none
    censoring = Censoring("none", float(result.fit.censor_bound), 1.0, X.shape[0], clamp)
    fit = result.fit.stan_fit

    def drawn(*steps):
        draws, rng = synthesis.published_draws(fit.draws, fit.n_draws, seed, 1)
        return synthesis.sets_at_designs(model, draws, rng, design, (100, 50000), steps)[0][0]

    again = drawn(Debiased(model, censoring, seed, None, None))
    np.testing.assert_allclose(again, rel.data["income"].to_numpy(), rtol=1e-12)
    plain = drawn()
    assert not np.allclose(plain, again)


@pytest.mark.slow
def test_diagnostics_confidential_and_report_clean(released):
    _, rel = released
    assert rel.diagnostics["confidential"].startswith("CONFIDENTIAL")
    assert set(rel.diagnostics["columns"]) == {"income", "spend"}
    text = json.dumps(rel.report, default=str)
    assert "n_censored" not in text and "lipschitz" not in text


@pytest.mark.parametrize(
    ("figures", "advice"),
    [
        ({"rhat_max": 1.83, "ess_bulk_min": 3.0, "divergences": 0}, "multimodal"),
        ({"rhat_max": 1.02, "ess_bulk_min": 400.0, "divergences": 0}, "slow"),
        ({"rhat_max": 1.5, "ess_bulk_min": 80.0, "divergences": 0}, "slow"),
    ],
)
def test_an_unconverged_column_gets_the_advice_of_its_failure(figures, advice):
    """A table's unconverged column, in the table's confidential verdict: chains in
    different modes are told that more chains will not help and that PH needs none; a
    slow-mixing fit is told to run longer. The note names the column once and keeps the
    confidential figures."""
    from dpsynth.engine.diagnostics import convergence_note
    from dpsynth.table.pipeline import table_convergence_note

    text = table_convergence_note(convergence_note(figures), "income")
    assert text.startswith("column 'income': ") and text.count("column 'income'") == 1
    assert "CONFIDENTIAL figures" in text and f"max R-hat {figures['rhat_max']:.3g}" in text
    expected = TABLE_MULTIMODAL_ADVICE if advice == "multimodal" else TABLE_CONVERGENCE_ADVICE
    assert text.endswith(expected)
    assert ("will not help" in text) == (advice == "multimodal")
    named = table_convergence_note(convergence_note(figures), "income", reference=True)
    assert "reference = " not in named  # the spec names one already
    assert named == text.replace("a public reference (reference = ... in the spec), ", "")


@pytest.mark.slow
def test_unconverged_column_is_released_and_told_to_the_curator(tmp_path):
    """A column whose fit misses the convergence policy no longer refuses the table (the
    outcome would depend on the data): the table is released under the same label as a
    converged one, the attempt is settled as released, and the confidential verdict is
    poor, naming the column with the table's advice."""
    frame = _table(n=120)
    ledger = tmp_path / "budget.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(
            frame,
            _clean(_spec()),
            2.0,
            seed=1,
            sampler=Sampler(iter_warmup=30, iter_sampling=20),  # 40 draws: ESS < 100
            budget_file=ledger,
            budget_total=5.0,
        )
    assert rel.report["if_unseeded"]["guarantee"] == "DP" and rel.data.shape[0] == 120
    verdict = rel.diagnostics["verdict"]
    assert verdict["verdict"] == "poor" and verdict["converged"] is False
    assert verdict["next_step"].startswith("column 'income': the MCMC fit did not converge")
    assert verdict["next_step"].endswith((TABLE_CONVERGENCE_ADVICE, TABLE_MULTIMODAL_ADVICE))
    summary = budget.summary(ledger)
    assert summary["spent"] == pytest.approx(2.0)
    assert summary["entries"][0]["outcome"] == "released"


@pytest.mark.slow
def test_cli_synthesize_table_writes_all_files(tmp_path, capsys):
    data = tmp_path / "data.csv"
    _table(n=300).assign(notes="x").to_csv(data, index=False)  # a column not in the spec
    spec_file = _write_spec(tmp_path / "spec.toml", _clean(_spec()))
    out, rep, diag = tmp_path / "o.csv", tmp_path / "r.json", tmp_path / "d.json"
    argv = ["synthesize-table", str(data), "--spec", str(spec_file), "--epsilon", "12"]
    argv += ["--out", str(out), "--report", str(rep), "--diagnostics", str(diag), "--seed", "7"]
    argv += ["--skip-preflight"]  # about the files (tests/test_preflight.py: the preflight)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "[dpsynth] not in the spec, so not released: notes" in err
    assert "[dpsynth] NOT DP:" in err  # a seeded release: its verdict never reads publishable
    report = json.loads(rep.read_text())
    assert report["input_columns_not_released"] == ["notes"]
    assert sum(report["epsilon_per_column"].values()) == pytest.approx(12.0)
    assert list(pd.read_csv(out).columns) == ["age", "region", "hours", "income", "spend"]
    assert json.loads(diag.read_text())["confidential"].startswith("CONFIDENTIAL")


@pytest.mark.slow
def test_ph_first_column_then_regression():
    frame = _table(n=200)
    spec = _clean(_spec(confidential__0__mechanism="ph", confidential__0__model=None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, 8.0, m=2, seed=5, sampler=LONG_CHAINS)
    cols = rel.report["confidential_columns"]
    assert [c["mechanism"] for c in cols] == ["ph", "censor-uw"]
    assert [len(c["ledger"]["spends"]) for c in cols] == [2, 4]  # m sets cost m times
    # spend's "auto" centring at M = 0.7 * (8 / 2) / 2 / 4 = 0.35: marginal, which buys a
    # histogram of its marginal (one per set) beside its fit's draws
    assert (cols[1]["centring"], "centring_rule" in cols[1]) == ("marginal", True)
    spends = [s["epsilon"] for s in cols[1]["ledger"]["spends"]]
    assert math.fsum(spends) == pytest.approx(cols[1]["epsilon_allocated"])
    assert rel.data["income"].between(100, 50000).all()
    assert rel.data["synthetic_set"].value_counts().to_dict() == {1: 200, 2: 200}
    assert not rel.data.loc[rel.data.synthetic_set == 1, "spend"].equals(
        rel.data.loc[rel.data.synthetic_set == 2, "spend"].reset_index(drop=True)
    )


def test_subsampling_map_inverts_the_amplification():
    """epsilon' = log(1 + (n/k)(e^eps - 1)) is the inverse of Balle et al.'s amplification
    eps = log(1 + (k/n)(e^eps' - 1)); no subsample (k >= n) leaves epsilon as it is."""
    for eps, k, n in [(0.1, 100, 28155), (1.8, 2000, 28155), (6.0, 999, 1000)]:
        inner = relations.subsampling_map(eps, k, n)
        assert inner > eps
        assert math.log1p(k / n * math.expm1(inner)) == pytest.approx(eps, rel=1e-12)
    assert relations.subsampling_map(800.0, 10, 1000) == pytest.approx(800.0 + math.log(100))
    assert relations.subsampling_map(0.7, 500, 500) == 0.7
    assert relations.subsampling_map(0.7, 900, 500) == 0.7
    assert relations.subsampling_map(0.7, 100, 400) < relations.subsampling_map(0.7, 100, 800)


@pytest.mark.slow
def test_fit_records_fits_a_subsample_and_reports_the_amplified_epsilon():
    """A model column fitted to 120 of 400 records: its fit spends the epsilon that
    subsampling amplifies to its share, the report says so, synthesis covers all 400."""
    frame = _table(n=400)
    spec = _clean(_spec(confidential__0__mechanism="ph", confidential__0__model=None))
    spec["fit_records"] = 120
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, 4.0, seed=11, sampler=LONG_CHAINS)
    income, spend = rel.report["confidential_columns"]
    assert "fit_subsample" not in income  # PH takes every record
    sub = spend["fit_subsample"]
    assert (sub["fit_records"], sub["of_records"]) == (120, 400)
    assert sub["epsilon_of_the_fit"] == pytest.approx(math.log1p(400 / 120 * math.expm1(2.0)))
    assert rel.report["epsilon_per_column"] == {"income": 2.0, "spend": 2.0}
    assert rel.report["if_unseeded"] == {"guarantee": "DP", "epsilon": 4.0}
    assert rel.diagnostics["columns"]["spend"]["n_censored"] <= 120
    assert len(rel.confidential["spend"].fit.alpha) == 120  # one weight per record fitted
    assert rel.data["spend"].notna().sum() == 400
    assert rel.data["spend"].between(10, 20000).all()


def test_fit_records_defaults_to_2000_and_all_takes_every_record():
    """A spec without ``fit_records`` fits its model columns to a random 2,000 records of a
    larger table (none of a table of 2,000 or fewer); ``"all"`` fits every record."""
    from dpsynth.table.columns import subsample_size
    from dpsynth.table.spec import FIT_RECORDS_DEFAULT

    spec = parse_spec(_clean(_spec()))
    assert spec.fit_records == FIT_RECORDS_DEFAULT == 2000
    col = spec.confidential[1]
    assert subsample_size(col, spec.fit_records, 28_155) == 2000
    assert subsample_size(col, spec.fit_records, 2000) is None
    every = parse_spec({**_clean(_spec()), "fit_records": "all"})
    assert every.fit_records is None and subsample_size(col, None, 28_155) is None


def test_calibration_defaults_by_model_and_reference():
    """A beta-regression column is calibrated on 20 bins (30%) by default and centred at the
    marginal fit, or at the reference where the spec names one; a log-normal column is not
    calibrated unless asked, and centred "auto" (resolved at release, its histogram's 30%
    spent only if marginal); a count or level column is centred at its
    marginal (its histogram spends 30%) and a count column calibrated on its integers;
    calibrate_bins = 0 turns calibration off, centring = "none" the histogram."""
    spec = _spec(confidential__1__model="beta-regression")
    income, spend = parse_spec(_clean(copy.deepcopy(spec))).confidential
    assert (income.calibrate_bins, income.calibrate_share, income.centring) == (None, 0.3, "auto")
    visits, insured = parse_spec(COUNT_LEVEL_SPEC).confidential
    assert (visits.calibrate_bins, visits.calibrate_share, visits.centring) == (
        20, 0.3, "marginal")  # fmt: skip
    assert (insured.calibrate_bins, insured.calibrate_share, insured.centring) == (
        None, 0.3, "marginal")  # fmt: skip
    assert (spend.calibrate_bins, spend.calibrate_share, spend.centring) == (20, 0.3, "marginal")
    assert spend.fit_share == pytest.approx(0.7)
    assert (spend.calibrate_dispersion, visits.calibrate_dispersion) == (True, False)
    kept = _spec(
        confidential__1__model="beta-regression", confidential__1__calibrate_dispersion=False
    )
    assert not parse_spec(_clean(kept)).confidential[1].calibrate_dispersion
    with_ref = parse_spec({**_clean(copy.deepcopy(spec)), "reference": "public.csv"})
    assert [c.centring for c in with_ref.confidential] == ["reference", "reference"]
    with_ref = parse_spec({**COUNT_LEVEL_SPEC, "reference": "public.csv"})
    assert [c.fit_share for c in with_ref.confidential] == [0.7, 1.0]  # visits: calibrated
    off = parse_spec(_clean(_spec(confidential__1__model="beta-regression",
                                  confidential__1__calibrate_bins=0)))  # fmt: skip
    assert (off.confidential[1].calibrate_bins, off.confidential[1].fit_share) == (None, 0.7)
    assert off.confidential[1].centring == "auto"  # its 0.3 spent only if resolved marginal
    centred = parse_spec(_clean(_spec(confidential__1__calibrate_bins=0,
                                      confidential__1__centring="marginal")))  # fmt: skip
    assert (centred.confidential[1].calibrate_share, centred.confidential[1].fit_share) == (
        0.3, 0.7)  # fmt: skip
    paper = parse_spec(_clean(_spec(confidential__1__model="beta-regression",
                                    confidential__1__calibrate_bins=0,
                                    confidential__1__centring="none")))  # fmt: skip
    assert (paper.confidential[1].calibrate_share, paper.confidential[1].fit_share) == (0, 1.0)


def test_auto_centring_resolves_at_the_fits_bound():
    """centring = "auto" becomes "marginal" where the centred fit's bound M (0.7 of eps_j
    over 4 under substitution, per set, amplified by a subsample) is below
    AUTO_CENTRE_BOUND, else "none" with the whole share to the fit; explicit centrings,
    and columns that are not "auto", are unchanged."""
    from dpsynth.table.pipeline import resolved_spec
    from dpsynth.table.spec import AUTO_CENTRE_BOUND

    spec = parse_spec(_clean(copy.deepcopy(BASE)))
    edge = AUTO_CENTRE_BOUND * 4 / 0.7 * 2  # total epsilon whose half puts income at the bound
    small = resolved_spec(spec, edge * 0.99, 1, 300).confidential[0]
    large = resolved_spec(spec, edge * 1.01, 1, 300).confidential[0]
    assert (small.centring, small.calibrate_share, small.centring_auto) == ("marginal", 0.3, True)
    assert (large.centring, large.calibrate_share, large.fit_share) == ("none", 0.0, 1.0)
    per_set = resolved_spec(spec, edge * 1.01, 2, 300).confidential[0]  # m = 2: half each
    assert per_set.centring == "marginal"
    amplified = resolved_spec(spec, edge * 0.99, 1, 20 * spec.fit_records).confidential[0]
    assert amplified.centring == "none"  # 2,000 of 40,000 records: a larger fit epsilon
    for fixed in ("none", "marginal"):
        explicit = parse_spec(_clean(_spec(confidential__0__centring=fixed)))
        for eps in (0.5, 50.0):
            assert resolved_spec(explicit, eps, 1, 300).confidential[0] == explicit.confidential[0]


def test_calibrated_beta_fit_takes_its_centres_precision_as_known():
    """A calibrated beta regression (calibrate_dispersion, the default) centred at a public
    point fits with the centre's kappa as known data (``kappa_known`` in the program's
    data, ``kappa_fixed`` = 1); without calibrate_dispersion, without a centre dict, or for
    a model with no dispersion parameter, the fit's model is the column's own
    (kappa_fixed = 0: fitted)."""
    from dpsynth.models.catalogue import stan_data

    spend = parse_spec(_clean(_spec(confidential__1__model="beta-regression"))).confidential[1]
    centre = {"beta": [0.1, 0.0, 0.0], "kappa": 3.5}
    model = fit_model(spend, centre)
    assert (model.name, model.known_dispersion) == ("beta-regression", 3.5)
    data = stan_data(model, np.full(4, 0.5), np.ones(4), X=np.zeros((4, 1)))
    assert (data["kappa_fixed"], data["kappa_known"]) == (1, 3.5)
    assert fit_model(spend, None).known_dispersion is None
    assert fit_model(spend, "saturated").known_dispersion is None
    kept = _spec(
        confidential__1__model="beta-regression", confidential__1__calibrate_dispersion=False
    )
    assert fit_model(parse_spec(_clean(kept)).confidential[1], centre).known_dispersion is None
    own = stan_data(get_model("beta-regression"), np.full(4, 0.5), np.ones(4))
    assert own["kappa_fixed"] == 0
    income = parse_spec(_clean(_spec())).confidential[0]
    assert fit_model(income, {"beta": [0.0], "sigma": 1.0}).dispersion is None
    with pytest.raises(InputError, match="kappa"):
        get_model("beta-regression").with_known_dispersion(0.0)
    with pytest.raises(InputError, match="model"):
        get_model("lognormal-regression").with_known_dispersion(1.0)


def test_downscale_is_one_by_default_and_auto_a_function_of_public_inputs():
    """Known answers for ``downscale``: a censored model column's weight is 1 (the paper's
    Censor_uw) unless the spec sets a number or "auto", a PH column has none; "auto" gives
    d = min(1, M / DOWNSCALE_NATS) with M = epsilon / 4 (substitution), so epsilon 2 gives
    1/3 and epsilon 8 gives 1."""
    from dpsynth.table.columns import downscale_of
    from dpsynth.table.spec import DOWNSCALE_NATS

    cols = parse_spec(_clean(_spec(confidential__1__downscale=0.4))).confidential
    assert (cols[0].downscale, cols[1].downscale) == (1.0, 0.4)
    auto = parse_spec(_clean(_spec(confidential__0__downscale="auto"))).confidential[0]
    assert auto.downscale == "auto"
    assert downscale_of(cols[0], 2.0) == 1.0
    with_ph = {**BASE, "confidential": [*BASE["confidential"], GIVEN_COLUMN]}
    assert parse_spec(_clean(with_ph)).confidential[2].downscale is None
    assert DOWNSCALE_NATS == pytest.approx(1.5)
    assert downscale_of(auto, 2.0) == pytest.approx(0.5 / 1.5)
    assert downscale_of(auto, 8.0) == 1.0
    assert downscale_of(cols[1], 2.0) == 0.4


def test_debias_is_on_by_default_only_where_it_applies():
    """``debias``: on for a censor-uw continuous or count model column unless the spec says
    false; off (and refused when asked) for a PH column and a level model."""
    cols = parse_spec(_clean(_spec(confidential__1__debias=False))).confidential
    assert (cols[0].debias, cols[1].debias) == (True, False)
    with_ph = {**BASE, "confidential": [*BASE["confidential"], GIVEN_COLUMN]}
    assert parse_spec(_clean(with_ph)).confidential[2].debias is False
    logistic = {"name": "owner", "model": "logistic", "levels": ["no", "yes"]}
    with_level = {**BASE, "confidential": [*BASE["confidential"], logistic]}
    assert parse_spec(_clean(with_level)).confidential[2].debias is False
    with pytest.raises(InputError, match="debias.*'owner'"):
        parse_spec(_clean({**with_level, "confidential": [*BASE["confidential"],
                                                          {**logistic, "debias": True}]}))  # fmt: skip


def test_clamp_is_smooth_by_default_but_for_a_count_column_of_poisson():
    """``clamp``: "smooth" for a model column (here log-normal regressions and a categorical)
    unless the spec says "hard", the paper's "hard" for a poisson-regression one
    (``spec.CLAMP_DEFAULT``); a model whose program does not accept "smooth" (a stand-in: every
    table model's program now does) is refused in one line naming the column, before the
    data are looked at (here: not even a frame)."""
    sector = {"name": "sector", "model": "categorical", "levels": ["a", "b", "c"]}
    sector["mechanism"] = "censor-uw"  # a level column's default is PH where its cells are few
    visits = {"name": "visits", "model": "poisson", "bounds": [0, 50]}
    spec = {**BASE, "confidential": [*BASE["confidential"], sector, visits]}
    assert [c.clamp for c in parse_spec(_clean(copy.deepcopy(spec))).confidential] == [
        "smooth", "smooth", "smooth", "hard"
    ]  # fmt: skip
    hard = {**BASE, "confidential": [*BASE["confidential"], {**sector, "clamp": "hard"}]}
    assert parse_spec(_clean(hard)).confidential[2].clamp == "hard"
    assert (
        fit_model(parse_spec(_clean(copy.deepcopy(spec))).confidential[2], None).clamp == "smooth"
    )
    hard_only = dataclasses.replace(MODELS["lognormal-regression"], clamps=("hard",))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(MODELS, "lognormal-regression", hard_only)
        with pytest.raises(InputError) as info:
            named = _spec(confidential__0__clamp="hard", confidential__1__clamp="smooth")
            synthesize_table(None, _clean(named), 1.0)
    assert info.value.param == "clamp" and "\n" not in str(info.value)
    assert "column 'spend': model 'lognormal-regression' accepts clamp hard" in str(info.value)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_debias_moves_a_shrunk_censored_slope_back_towards_the_data(seed):
    """Known answer of :func:`dpsynth.models.debias.corrected`: a simulated beta regression (1,000
    records, true slope 1.5, kappa 20 known), a public centre with slope 0 and the bound of
    epsilon 1 under substitution (M = 0.25). The clamped objective's mode on the data is
    shrunk (slope about 0.5 against the data's own estimate near 1.46); one bootstrap step
    from it, using only the mode, the design and public settings, moves it towards the
    data's by more than 0.12 and not past it (seeds 7 to 16 moved it by 0.16 to 0.24: at
    this strong a shrinkage one step recovers about a fifth of the gap)."""
    from scipy.special import expit, logit

    from dpsynth.models.catalogue import PublicDesign, design_matrix
    from dpsynth.models.centring import record_centre
    from dpsynth.models.debias import Censoring, clamped_mode, corrected

    rng = np.random.default_rng(seed)
    x = rng.uniform(size=1000)
    mu = expit(-0.5 + 1.5 * x)
    y = rng.beta(mu * 20, (1 - mu) * 20)
    model = get_model("beta-regression").with_known_dispersion(20.0)
    centring = {"beta": [float(logit(np.mean(y))), 0.0], "kappa": 20.0}
    X = design_matrix(1000, x[:, None].view(PublicDesign))  # on its public scale, as a table's
    data = {"n": 1000, "K": 2, "X": X, "y": y}
    censoring = Censoring(centring, accounting.censor_bound(1.0, "substitution"), 1.0, 1000)
    assert censoring.bound == pytest.approx(0.25)
    full = Censoring(centring, 1e9, 1.0, 1000)  # no record reaches this bound
    centre = record_centre(model, data, centring)
    start = {"beta": np.array(centring["beta"]), "kappa": 20.0}
    data_fit = clamped_mode(model, start, data, centre, full)[1]
    shrunk = clamped_mode(model, start, data, centre, censoring)
    assert shrunk[1] < 0.85 < 1.3 < data_fit
    fixed = corrected(model, {"beta": shrunk, "kappa": 20.0}, X, censoring,
                      np.random.default_rng(1))  # fmt: skip
    print(
        f"slopes: data {data_fit:.3f}, censored mode {shrunk[1]:.3f}, corrected {fixed['beta'][1]:.3f}"
    )
    assert shrunk[1] + 0.12 < fixed["beta"][1] < data_fit
    assert fixed["kappa"] == 20.0  # only the coefficients move


def test_debias_leaves_an_uncensored_draw_where_it_is():
    """Invariant: where no record reaches the bound, the objective is the posterior's and a
    draw at the data's mode is its own fixed point; the step moves it by its Monte Carlo
    error only (a 20,000-record simulated set: about 0.02 in the slope; tolerance 0.1)."""
    from scipy.special import expit

    from dpsynth.models.catalogue import PublicDesign, design_matrix
    from dpsynth.models.debias import Censoring, corrected

    rng = np.random.default_rng(3)
    x = rng.uniform(size=20_000)
    X = design_matrix(x.size, x[:, None].view(PublicDesign))
    draw = {"beta": np.array([-0.5, 1.5]), "kappa": np.float64(20.0)}
    model = get_model("beta-regression").with_known_dispersion(20.0)
    assert expit(X @ draw["beta"]).min() > 0.3  # a design where the model is well inside (0, 1)
    fixed = corrected(model, draw, X, Censoring("none", 1e9, 1.0, 20_000), rng)
    assert np.max(np.abs(fixed["beta"] - draw["beta"])) < 0.1


def test_debias_noise_on_a_small_design_is_that_of_its_simulated_rows():
    """On a design of 1,000 rows (a small table's), the step simulates ``SIM_ROWS`` of them
    drawn again, so the noise it adds to an uncensored draw is a 20,000-record set's, not a
    1,000-record one's: over 12 generators the slope moved with sd 0.015 (0.041 when the
    simulated set was the design's own 1,000 rows); tolerance 0.025."""
    from dpsynth.models.catalogue import PublicDesign, design_matrix
    from dpsynth.models.debias import SIM_ROWS, Censoring, corrected

    x = np.random.default_rng(3).uniform(size=1000)
    X = design_matrix(x.size, x[:, None].view(PublicDesign))
    draw = {"beta": np.array([-0.5, 1.5]), "kappa": np.float64(20.0)}
    model = get_model("beta-regression").with_known_dispersion(20.0)
    censoring = Censoring("none", 1e9, 1.0, 1000)
    moves = [
        corrected(model, draw, X, censoring, np.random.default_rng(s))["beta"][1] - 1.5
        for s in range(12)
    ]
    assert SIM_ROWS == 20_000 and np.std(moves) < 0.025


def test_censor_uw_refuses_a_bad_downscale_before_reading_any_record():
    """``downscale`` outside (0, 1] is refused by the release's settings check, before the
    records are read (here the records are not even numbers)."""
    from dpsynth.release.single import synthesize

    for bad in (0.0, 1.5, True):
        with pytest.raises(InputError, match="downscale"):
            synthesize(["not", "read"], model="beta", mechanism="censor-uw", epsilon=1.0,
                       downscale=bad)  # fmt: skip


@pytest.mark.slow
def test_downscaled_censored_fit_shrinks_its_slope_less():
    """Censor_uw centred at a slope-0 public point, at a small bound (epsilon 1, M = 0.25):
    with unit weights the censored fit's slope shrinks towards the centre (the records the
    slope explains best reach the bound first); with a table's ``downscale = "auto"`` weight
    d = M / 1.5 it shrinks less. Simulated beta regression, 1,000 records, true slope 1.5 (the data's
    own estimate 1.46); tolerances well outside the fits' Monte Carlo error (posterior sds
    about 0.1 and 0.3). The design is on its public scale, as a table's
    (:class:`~dpsynth.models.catalogue.PublicDesign`: not standardized)."""
    from scipy.special import expit, logit

    from dpsynth.models.catalogue import PublicDesign
    from dpsynth.release.single import synthesize
    from dpsynth.table.spec import DOWNSCALE_NATS

    rng = np.random.default_rng(7)
    x = rng.uniform(size=1000)
    mu = expit(-0.5 + 1.5 * x)
    y = rng.beta(mu * 20, (1 - mu) * 20)
    centre = {"beta": [float(logit(np.mean(y))), 0.0], "kappa": 20.0}
    model = get_model("beta-regression").with_known_dispersion(20.0)
    slopes = {}
    for d in (1.0, 0.25 / DOWNSCALE_NATS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = synthesize(y, model=model, mechanism="censor-uw", epsilon=1.0, seed=11,
                             X=x[:, None].view(PublicDesign), centring=centre, downscale=d,
                             sampler=Sampler(chains=2, iter_warmup=500, iter_sampling=1000))  # fmt: skip
        alpha = rel.confidential.fit.alpha
        assert np.allclose(alpha, d, rtol=1e-6, atol=0)  # every weight the constant d
        slopes[d] = float(np.mean(np.asarray(rel.confidential.fit.stan_fit.draws["beta"])[:, 1]))
    unit, auto = slopes[1.0], slopes[0.25 / DOWNSCALE_NATS]
    print(f"slopes: unit weights {unit:.3f}, downscaled {auto:.3f}")
    assert unit < 0.85  # shrunk well below the data's 1.46
    assert auto > unit + 0.35


@pytest.mark.slow
@pytest.mark.parametrize(("name", "value"), [("beta-regression", 2.5), ("negbin-regression", 4.0)])
def test_a_known_dispersion_is_fixed_in_every_draw(name, value):
    """With ``with_known_dispersion`` the program's dispersion is that value in every draw
    (a transformed parameter, not sampled) and the coefficients are still fitted; with the
    model's own data (0) it is sampled and varies."""
    from dpsynth import engine
    from dpsynth.models.catalogue import stan_data

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 1))
    if name == "beta-regression":
        y = rng.beta(2 * np.exp(0.5 * X[:, 0]), 2)
    else:
        y = rng.negative_binomial(4, 4 / (4 + np.exp(1 + 0.5 * X[:, 0])))
    own = get_model(name)
    for model, fixed in ((own.with_known_dispersion(value), True), (own, False)):
        data = stan_data(model, model.to_stan_scale(y), np.ones(y.size), X=X)
        fit = engine.fit(model.stan_file, data, seed=5, chains=2, iter_warmup=300,
                         iter_sampling=200)  # fmt: skip
        d = np.asarray(fit.draws[own.dispersion], dtype=float).ravel()
        assert np.all(d == value) if fixed else np.std(d) > 0
        assert np.mean(np.asarray(fit.draws["beta"])[:, 1]) > 0.2  # the slope is fitted


def test_matched_phi_gives_the_counts_the_target_mean_and_variance():
    """Known answer: negative binomial counts at the returned intercept and phi have the
    target mean and variance (200,000 draws; tolerances 1% and 3%, several sds of the
    sample moments) and keep the slope; where the means and their Poisson noise alone vary
    more than the target, or the target mean is 0, the draw's phi is kept."""
    from dpsynth.table.steps import matched_phi

    rng = np.random.default_rng(11)
    X = np.column_stack([np.ones(200_000), rng.uniform(size=200_000)])
    beta, phi = matched_phi(np.array([-2.0, 1.0]), X, 1.4, 6.0, 9.0)
    assert beta[1] == 1.0 and phi != 9.0
    mu = np.exp(X @ beta)
    y = rng.negative_binomial(phi, phi / (phi + mu))
    assert y.mean() == pytest.approx(1.4, rel=0.01)
    assert y.var() == pytest.approx(6.0, rel=0.03)
    assert matched_phi(np.array([-2.0, 1.0]), X, 1.4, 1.0, 9.0)[1] == 9.0
    assert matched_phi(np.array([-2.0, 1.0]), X, 0.0, 1.0, 9.0)[1] == 9.0


def test_matched_kappa_gives_the_synthetic_values_the_target_variance():
    """Known answer: Beta(mu kappa, (1 - mu) kappa) draws at the returned kappa have the
    target variance (200,000 draws: sd of the sample variance about 0.3%, tolerance 2%);
    where the means alone vary more than the target, the draw's kappa is kept."""
    from dpsynth.table.steps import matched_kappa

    rng = np.random.default_rng(7)
    X = np.column_stack([np.ones(200_000), rng.uniform(size=200_000)])
    beta = np.array([-1.0, 2.0])
    mu = 1 / (1 + np.exp(-X @ beta))
    for target in (0.02, 0.05, 0.1):
        kappa = matched_kappa(beta, X, target, 50.0)
        y = rng.beta(mu * kappa, (1 - mu) * kappa)
        assert y.var() == pytest.approx(target, rel=0.02), (target, kappa)
    assert matched_kappa(beta, X, 0.5 * mu.var(), 50.0) == 50.0


def test_rank_mapped_keeps_the_order_and_takes_the_target_marginal():
    """Known answer: the i-th smallest value becomes the target's quantile at (i + 1/2)/n;
    NaN stays NaN; ties are broken at random, never by position."""
    values = np.array([3.0, np.nan, 1.0, 2.0, 10.0])
    target = np.arange(101.0)  # quantile u is 100 u
    out = rank_mapped(values, target, np.random.default_rng(0))
    np.testing.assert_allclose(out[[2, 3, 0, 4]], [12.5, 37.5, 62.5, 87.5])
    assert np.isnan(out[1])
    firsts = {
        int(np.argmin(rank_mapped(np.zeros(2), target, np.random.default_rng(s))))
        for s in range(20)
    }
    assert firsts == {0, 1}


@pytest.mark.slow
def test_calibrated_column_spends_its_share_on_the_fit_and_the_histogram():
    """spend calibrated on 20 public bins (30% of its share) and fitted to 120 of 400
    records: the fit's epsilon is amplified from 70% of 2.0, the histogram spends 0.6 on
    every record, the report and the ledger add up to the column's 2.0, and the synthetic
    spend keeps the model's order against income (rank correlation of the logs 0.93)."""
    frame = _table(n=400)
    spec = _clean(_spec(confidential__0__mechanism="ph", confidential__0__model=None,
                        confidential__1__calibrate_bins=20,
                        confidential__1__centring="none"))  # fmt: skip
    spec["fit_records"] = 120
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, 4.0, seed=11, sampler=LONG_CHAINS)
    spend = rel.report["confidential_columns"][1]
    cal = spend["calibration"]
    assert (cal["bins"], cal["epsilon"]) == (20, pytest.approx(0.6))
    assert cal["epsilon_of_the_fit"] == pytest.approx(1.4)
    expected = math.log1p(400 / 120 * math.expm1(1.4))
    assert spend["fit_subsample"]["epsilon_of_the_fit"] == pytest.approx(expected)
    spends = [s["epsilon"] for s in spend["ledger"]["spends"]]
    assert len(spends) == 2 and math.fsum(spends) == pytest.approx(expected + 0.6)
    assert rel.report["if_unseeded"] == {"guarantee": "DP", "epsilon": 4.0}
    assert "calibration_histogram" in rel.diagnostics["columns"]["spend"]
    syn = rel.data
    assert syn["spend"].between(10, 20000).all() and syn["spend"].nunique() > 350
    assert syn["income"].rank().corr(syn["spend"].rank()) > 0.5


@pytest.mark.slow
def test_marginal_centring_fits_the_model_to_public_inputs_only(monkeypatch):
    """centring = "marginal": the centre is the model's fit to the histogram's sample beside
    the public and synthetic columns; the confidential spend values never reach it (they
    are replaced by NaN in a spy's copy of what the fit receives)."""
    import dpsynth.release.plan as plan

    seen = {}
    real_point = plan.reference_point

    def spy(reference_y, model, **kw):
        seen["y"], seen["X"] = np.asarray(reference_y), np.asarray(kw["reference_X"])
        seen["sampler"] = kw["sampler"]
        return real_point(reference_y, model, **kw)

    monkeypatch.setattr(plan, "reference_point", spy)
    frame = _table(n=400)
    spec = _clean(_spec(confidential__0__mechanism="ph", confidential__0__model=None,
                        confidential__1__calibrate_bins=20,
                        confidential__1__centring="marginal"))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, 4.0, seed=11, sampler=LONG_CHAINS)
    centre = rel.report["confidential_columns"][1]["tuning"]["centring"]
    assert len(centre["beta"]) == seen["X"].shape[1] + 1 and centre["sigma"] > 0
    assert seen["y"].size == 400 and not np.isin(seen["y"], frame["spend"]).any()
    short = (seen["sampler"].iter_warmup, seen["sampler"].iter_sampling)  # a point: fewer draws
    assert short == (min(LONG_CHAINS.iter_warmup, 500), min(LONG_CHAINS.iter_sampling, 500))
    income = load_spec(spec).confidential[0]
    synthetic, real = (features(income, rel.data["income"].to_numpy()),
                       features(income, frame["income"].to_numpy()))  # fmt: skip
    assert np.isin(seen["X"][:, -1], synthetic[:, -1]).all()
    assert not np.isin(seen["X"][:, -1], real[:, -1]).any()
    assert rel.report["if_unseeded"] == {"guarantee": "DP", "epsilon": 4.0}


@pytest.mark.slow
def test_reference_weights_and_centring(tmp_path):
    """Censor_w with weights from the public reference, then Censor_uw with reference
    centring (the default when a reference is given): both DP with weights and centres from
    the public file only; the report lists both columns' epsilons."""
    reference = tmp_path / "reference.csv"
    _table(n=300, seed=2029).to_csv(reference, index=False)
    spec = _clean(_spec(confidential__0__mechanism="censor-w"))
    spec["reference"] = str(reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(_table(n=300), spec, 12.0, seed=11)
    cols = rel.report["confidential_columns"]
    assert [c["mechanism"] for c in cols] == ["censor-w", "censor-uw"]
    assert [c["if_unseeded"]["guarantee"] for c in cols] == ["DP", "DP"]
    assert isinstance(cols[1]["tuning"]["centring"], dict)  # public reference values
    assert sum(rel.report["epsilon_per_column"].values()) == pytest.approx(12.0)


def test_missing_values_refused_without_indicator():
    frame = _table(n=50)
    frame.loc[3, "spend"] = np.nan
    with pytest.raises(
        InputError,
        match=r"'spend' has missing values \[CONFIDENTIAL, from the data: 1 value.*indicator",
    ) as info:
        synthesize_table(frame, _clean(_spec()), 1.0)
    assert info.value.param == "missing"


def _has_model(name: str) -> bool:
    try:
        get_model(name)
    except InputError:
        return False
    return True


def test_out_of_bounds_value_refused_naming_the_column():
    frame = _table(n=50)
    frame.loc[5, "income"] = 1e6
    with pytest.raises(
        InputError,
        match=r"column 'income' has values outside .*\[CONFIDENTIAL, from the data: 1 record\(s\), the first at record 6\].*clip",
    ) as info:
        synthesize_table(frame, _clean(_spec()), 1.0)
    assert info.value.param == "bounds"


def test_level_outside_spec_refused():
    frame = _table(n=50)
    frame.loc[2, "region"] = "w"
    with pytest.raises(
        InputError,
        match=r"column 'region' has a level outside .*\[CONFIDENTIAL, from the data: 1 record\(s\), the first at record 3\]",
    ) as info:
        synthesize_table(frame, _clean(_spec()), 1.0)
    assert info.value.param == "levels"


def test_design_is_local_and_never_standardized():
    """Changing record r changes row r of a successor's design only (Proposition 1, step 1),
    and design_matrix keeps a PublicDesign as given (no mean/sd read from the data)."""
    from dpsynth.models.catalogue import PublicDesign, design_matrix
    from dpsynth.table.design import features

    spec = load_spec(_clean(_spec()))
    income = spec.confidential[0]
    x = _table(n=40)["income"].to_numpy()
    x2 = x.copy()
    x2[7] = 49000.0
    f, f2 = features(income, x), features(income, x2)
    changed = np.flatnonzero((f != f2).any(axis=1))
    assert changed.tolist() == [7]
    np.testing.assert_allclose(f[:, 0], (x - 100) / (50000 - 100))
    D = design_matrix(40, f.view(PublicDesign))
    np.testing.assert_array_equal(D[:, 1], f[:, 0])
    assert not np.allclose(design_matrix(40, f)[:, 1], f[:, 0])  # plain X is standardized


def test_categorical_predecessor_one_hot_on_public_levels():
    from dpsynth.table.design import features, one_hot

    spec = _clean(_spec())
    spec["confidential"][0] = {"name": "income", "model": "categorical", "levels": ["a", "b", "c"]}
    col = load_spec(spec).confidential[0]
    codes = np.array([0.0, 2.0, np.nan, 1.0])
    np.testing.assert_array_equal(features(col, codes), [[0, 0], [0, 1], [0, 0], [1, 0]])
    assert one_hot(np.array([2, -1]), 3).tolist() == [[0, 1], [0, 0]]


def test_numbered_levels_enter_the_design_as_one_scaled_number():
    """design = "number": a categorical predecessor with numeric public levels is one
    column, the level scaled by the levels' range (public), 0 where missing."""
    from dpsynth.table.design import features

    spec = _clean(_spec())
    spec["confidential"][0] = {
        "name": "income",
        "model": "categorical",
        "levels": [8, 12, 16, 18],
        "design": "number",
    }
    col = load_spec(spec).confidential[0]
    assert col.n_features == 1
    codes = np.array([0.0, 1.0, np.nan, 3.0, 2.0])
    np.testing.assert_allclose(features(col, codes)[:, 0], [0, 0.4, 0, 1, 0.8])


def test_missing_indicator_values_from_the_data_mask():
    """The indicator column is the parent's missing mask (1 = missing); the values keep NaN."""
    from dpsynth.table.design import column_codes

    spec = _clean(_spec())
    spec["confidential"][1]["missing"] = "indicator"
    order = load_spec(spec).order()
    frame = _table(n=20)
    frame.loc[[2, 5], "spend"] = np.nan
    ind, _ = column_codes(frame, order[1])
    values, n_clipped = column_codes(frame, order[2])
    assert np.flatnonzero(ind).tolist() == [2, 5]
    assert np.flatnonzero(np.isnan(values)).tolist() == [2, 5] and n_clipped == 0


def test_clip_counts_go_to_the_diagnostics_only():
    from dpsynth.table.design import column_codes

    spec = _clean(_spec())
    spec["clip"] = True
    col = load_spec(spec).confidential[0]
    frame = _table(n=20)
    frame.loc[[1, 4], "income"] = [1e7, 5.0]
    values, n_clipped = column_codes(frame, col)
    assert n_clipped == 2 and values[1] == 50000 and values[4] == 100


@pytest.mark.slow
def test_cli_plan_table_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    public = tmp_path / "public.csv"
    _table(n=300).to_csv(public, index=False)
    spec_file = _write_spec(tmp_path / "spec.toml", _clean(_spec()))
    argv = ["plan-table", str(public), "--spec", str(spec_file), "--epsilon", "12", "--seed", "7"]
    assert main([*argv, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "income" in out and "spend" in out and "total epsilon 12" in out
    assert "centring none" in out  # eps 6 a column: "auto" at M 1.05 stays uncentred
    assert f"clamp {CLAMP_DEFAULT['lognormal-regression']}" in out  # the model's default
    assert "Sampling:" not in err and "[dpsynth] column" not in err  # --quiet
    assert sorted(p.name for p in tmp_path.iterdir()) == ["public.csv", "spec.toml"]


MIXED_SPEC = """
neighbours = "substitution"

[[public]]
name = "age"
type = "continuous"
bounds = [16, 90]

[[public]]
name = "region"
type = "categorical"
levels = ["north", "south"]

[[confidential]]
name = "employed"
model = "logistic"
mechanism = "censor-uw"   # named: a level column's default is PH where its cells are few
levels = [0, 1]

[[confidential]]
name = "sector"
model = "categorical"
mechanism = "censor-uw"
levels = ["a", "b", "c"]

[[confidential]]
name = "income"
model = "lognormal-regression"
bounds = [0, 250000]
missing = "indicator"
"""


def _mixed_table(n: int = 300, seed: int = 5) -> pd.DataFrame:
    """Employment depends on age, the sector strongly on employment (P(a) 0.6 vs 0.1), the
    income on both; a tenth of the incomes missing."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 80, n)
    emp = rng.binomial(1, 1 / (1 + np.exp(-(age - 45) / 10)))
    sector = np.where(
        emp == 1,
        rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1]),
        rng.choice(["a", "b", "c"], n, p=[0.1, 0.3, 0.6]),
    )
    income = np.exp(9 + 0.8 * emp + 0.01 * age + rng.normal(0, 0.5, n))
    income[rng.random(n) < 0.1] = np.nan
    region = rng.choice(["north", "south"], n)
    return pd.DataFrame(
        {"age": age, "region": region, "employed": emp, "sector": sector, "income": income}
    )


@pytest.mark.slow
@pytest.mark.skipif(not _has_model("logistic"), reason="the outcome models are not available")
def test_binary_categorical_and_missing_columns_end_to_end(tmp_path):
    """Binary, categorical and a continuous column with a missingness indicator in one table
    (epsilon 40 on 300 records: the check is the plumbing and the kept structure, not utility).

    The synthetic sector still follows employment: P(sector a | employed) - P(a | not) is 0.45
    in the data (0.6 vs 0.1 by construction); at least 0.2 is asked. Measured once: 0.40.

    The categorical column mixes slowly (bulk ESS about 10% of the draws), so every column
    passing the release's R-hat gate (1.01) needs long chains: measured max R-hat of the
    sector column 1.0105-1.0116 with 2 x (500 + 1000) and 4 x (1000 + 1000) (one CI machine
    refused at 1.03 with the former), 1.0027-1.0074 with 4 x (2000 + 2000), and
    1.0013-1.0021 (seeds 29-31) with the 4 x (3000 + 3000) used here. Seeded, so that one machine
    always gives the same verdict; the report then says what the unseeded release would be.
    """
    frame = _mixed_table()
    spec = tmp_path / "mixed.toml"
    spec.write_text(MIXED_SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(
            frame, spec, 40.0, allow_large_epsilon=True, seed=29,
            sampler=Sampler(chains=4, iter_warmup=3000, iter_sampling=3000),
        )  # fmt: skip
    syn = rel.data
    assert rel.report["if_unseeded"]["guarantee"] == "DP"
    assert rel.report["guarantee"] == "not private (known seed)"
    assert rel.report["if_unseeded"]["epsilon"] == pytest.approx(40.0)
    assert list(syn.columns) == ["age", "region", "employed", "sector", "income_missing", "income"]
    clamps = [c.get("clamp", "-").split(":")[0] for c in rel.report["confidential_columns"]]
    assert clamps == ["smooth", "smooth", "-", "smooth"]  # the indicator is drawn by PH
    assert set(syn["employed"].unique()) <= {0, 1} and set(syn["sector"]) <= {"a", "b", "c"}
    assert set(syn["income_missing"].unique()) <= {0, 1}
    assert syn["income"].isna().equals(syn["income_missing"] == 1)
    present = syn["income"].dropna()
    assert ((present >= 0) & (present <= 250000)).all()
    share_a = syn.groupby("employed")["sector"].apply(lambda s: (s == "a").mean())
    assert share_a[1] - share_a[0] > 0.2, share_a
    pd.testing.assert_frame_equal(syn[["age", "region"]], frame[["age", "region"]])


PH_LEVELS_SPEC = """
neighbours = "substitution"

[[public]]
name = "age"
type = "continuous"
bounds = [16, 90]

[[confidential]]
name = "sector"
mechanism = "ph"
type = "categorical"
levels = ["a", "b", "c", "d"]

[[confidential]]
name = "employed"
model = "logistic"
mechanism = "censor-uw"   # named: a level column's default is PH where its cells are few
levels = [0, 1]
"""


@pytest.mark.slow
def test_ph_on_public_levels_first_then_logistic(tmp_path):
    """A categorical first column by PH: one unit bin per PUBLIC level (level d, absent from
    the data, is a bin like the others), then a logistic column on it. Level shares within
    0.1 of the data's (epsilon 10 for the histogram: Laplace scale 0.2 on counts near 100;
    the rest is the multinomial draw of 300 records, sd about 0.03); the dependence kept:
    P(employed | a) - P(employed | c) is 0.55 in the data, at least 0.2 asked."""
    frame = _mixed_table()
    spec = tmp_path / "ph.toml"
    spec.write_text(PH_LEVELS_SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(
            frame[["age", "sector", "employed"]], spec, 20.0, allow_large_epsilon=True, seed=3,
            sampler=LONG_CHAINS,
        )  # fmt: skip
    cols = rel.report["confidential_columns"]
    assert [c["mechanism"] for c in cols] == ["ph", "censor-uw"]
    assert rel.report["if_unseeded"]["guarantee"] == "DP"
    syn = rel.data
    assert set(syn["sector"]) <= {"a", "b", "c", "d"}
    real = frame["sector"].value_counts(normalize=True)
    shares = syn["sector"].value_counts(normalize=True)
    for level in "abcd":
        assert abs(shares.get(level, 0.0) - real.get(level, 0.0)) < 0.1, (level, shares)
    by = syn.groupby("sector")["employed"].mean()
    assert by["a"] - by["c"] > 0.2, by


PH_AFTER_SPEC = """
neighbours = "substitution"

[[public]]
name = "age"
type = "continuous"
bounds = [16, 90]

[[confidential]]
name = "employed"
mechanism = "ph"
type = "binary"
levels = [0, 1]

[[confidential]]
name = "sector"
mechanism = "ph"
type = "categorical"
levels = ["a", "b", "c"]
"""


@pytest.mark.slow
def test_ph_level_column_after_others_is_drawn_given_the_discrete_ones(tmp_path):
    """PH for a level column after others: the perturbed histogram of the joint cells of the
    binary/categorical columns before it (employed) and its own levels, then
    each synthetic record's level drawn in its SYNTHETIC parent cell. At epsilon 10 for the
    column (Laplace scale 0.2 on counts of tens), P(a | employed) - P(a | not) is 0.45 in the
    data; at least 0.3 asked (multinomial noise of about 150 records per group: sd 0.05)."""
    frame = _mixed_table()
    spec = tmp_path / "after.toml"
    spec.write_text(PH_AFTER_SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(
            frame[["age", "employed", "sector"]], spec, 20.0, allow_large_epsilon=True, seed=4,
        )  # fmt: skip
    cols = {c["column"]: c for c in rel.report["confidential_columns"]}
    assert cols["sector"]["predecessors"] == ["employed"]
    assert cols["employed"]["predecessors"] == []
    assert rel.report["if_unseeded"]["guarantee"] == "DP"
    syn = rel.data
    assert set(syn["sector"]) <= {"a", "b", "c"}
    share_a = syn.groupby("employed")["sector"].apply(lambda s: (s == "a").mean())
    assert share_a[1] - share_a[0] > 0.3, share_a


def test_quadratic_design_is_bounded_local_and_centred():
    """design = "quadratic": u = (v - lo)/(hi - lo) and 4 (u - 1/2)^2, both in [0, 1], 0 where
    missing; record r's value enters row r only (Proposition 1, step 1)."""
    spec = _clean(_spec(confidential__0__design="quadratic"))
    income = load_spec(spec).confidential[0]
    assert income.design == "quadratic" and income.n_features == 2
    assert load_spec(_clean(_spec())).confidential[0].design == "linear"  # the default
    x = np.array([100.0, 25050.0, 50000.0, np.nan, 12575.0])
    f = features(income, x)
    np.testing.assert_allclose(f, [[0, 1], [0.5, 0], [1, 1], [0, 0], [0.25, 0.25]])
    x2 = x.copy()
    x2[1] = 100.0
    assert np.flatnonzero((features(income, x2) != f).any(axis=1)).tolist() == [1]


GIVEN_SPEC = """
neighbours = "substitution"

[[confidential]]
name = "x"
mechanism = "ph"
bounds = [0, 10]

[[confidential]]
name = "flag"
mechanism = "ph"
type = "binary"
levels = [0, 1]
given = ["x"]
given_bins = 5
"""


def test_parent_cells_bin_a_continuous_parent_on_public_bins():
    """A continuous parent in ``given`` enters the joint cells on ``given_bins`` equal-width
    bins of its PUBLIC bounds (the upper bound in the last bin; missing in the first)."""
    from dpsynth.table.design import parent_cell_codes
    from dpsynth.table.spec import n_cells, ph_parents

    spec = load_spec(tomllib.loads(GIVEN_SPEC))
    x, flag = spec.order()
    parents = ph_parents(flag, [x])
    assert parents == [x] and n_cells(flag, parents) == 5
    v = np.array([0.0, 1.99, 2.0, 5.5, 9.99, 10.0, np.nan])
    np.testing.assert_array_equal(parent_cell_codes(flag, parents, {"x": v}), [0, 0, 1, 2, 4, 4, 0])


def test_ph_level_column_given_a_continuous_column_keeps_a_u_shape(tmp_path):
    """``given = ["x"]``: the flag is drawn in its record's SYNTHETIC x bin from the perturbed
    joint histogram (5 x bins x 2 levels). In the data P(flag | x) is 0.9 in the outer
    bins and 0.1 inside; at epsilon 10 per column (Laplace scale 0.2 on counts of about 400)
    the synthetic outer-minus-inner gap must exceed 0.6 (sampling sd about 0.03). Without
    ``given`` the flag would be independent of x (gap near 0)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 10, 2000)
    outer = (x < 2) | (x >= 8)
    flag = rng.binomial(1, np.where(outer, 0.9, 0.1))
    frame = pd.DataFrame({"x": x, "flag": flag})
    spec = tmp_path / "given.toml"
    spec.write_text(GIVEN_SPEC)
    rel = synthesize_table(frame, spec, 20.0, allow_large_epsilon=True)
    cols = {c["column"]: c for c in rel.report["confidential_columns"]}
    assert cols["flag"]["predecessors"] == ["x"] and cols["flag"]["given_bins"] == 5
    assert rel.report["guarantee"] == "DP" and rel.report["epsilon"] == 20.0
    syn = rel.data
    s_outer = (syn["x"] < 2) | (syn["x"] >= 8)
    gap = syn.loc[s_outer, "flag"].mean() - syn.loc[~s_outer, "flag"].mean()
    assert gap > 0.6, gap
    assert frame.equals(pd.DataFrame({"x": x, "flag": flag}))  # input untouched


GIVEN_CONTINUOUS_SPEC = """
neighbours = "substitution"

[[confidential]]
name = "school"
mechanism = "ph"
type = "categorical"
levels = ["low", "mid", "high"]

[[confidential]]
name = "years"
mechanism = "ph"
bounds = [0, 40]
given = ["school"]
bins = 8
"""


def test_continuous_ph_column_given_a_level_column_keeps_its_conditional_shape(tmp_path):
    """A continuous PH column with ``given``: the perturbed histogram of (school level x
    8 public bins of years), each synthetic value drawn in its record's SYNTHETIC school
    level, uniform within the drawn bin. In the data years | school is centred at 30, 20
    and 10 (sd 3); at epsilon 10 per column the synthetic conditional means must be within
    1.5 of the data's (bins of width 5: within-bin uniformity moves a mean by under 1) and
    in [0, 40]."""
    rng = np.random.default_rng(8)
    school = rng.choice(["low", "mid", "high"], 3000)
    centre = pd.Series(school).map({"low": 30.0, "mid": 20.0, "high": 10.0}).to_numpy()
    years = np.clip(centre + rng.normal(0, 3, 3000), 0, 40)
    frame = pd.DataFrame({"school": school, "years": years})
    spec = tmp_path / "given.toml"
    spec.write_text(GIVEN_CONTINUOUS_SPEC)
    rel = synthesize_table(frame, spec, 20.0, allow_large_epsilon=True)
    cols = {c["column"]: c for c in rel.report["confidential_columns"]}
    assert cols["years"]["predecessors"] == ["school"] and cols["years"]["bins"] == 8
    assert rel.report["guarantee"] == "DP"
    syn = rel.data
    assert syn["years"].between(0, 40).all()
    real_means = frame.groupby("school")["years"].mean()
    syn_means = syn.groupby("school")["years"].mean()
    assert (syn_means - real_means).abs().max() < 1.5, (syn_means, real_means)


DOUBLE_SAMPLING_SPEC = """
neighbours = "substitution"

[[confidential]]
name = "a"
mechanism = "ph"
type = "categorical"
levels = ["x", "y", "z"]

[[confidential]]
name = "b"
mechanism = "ph"
type = "categorical"
levels = ["p", "q", "r", "s"]
given = ["a"]
"""


def test_ph_given_parents_adds_no_second_sampling_noise():
    """A PH column given parents draws each record's level from a joint-cell sample of
    ``PH_JOINT_DRAWS`` per record, so with independent draws the synthetic (a, b) joint is
    about as close to the data's as n records drawn straight from it: the mean joint TVD
    over 30 sets (epsilon 1000 in all: Laplace scale 0.12 on counts of hundreds) against the
    exact expected TVD of a multinomial of n (binomial sums). Seeds 1-3 and 7 gave 0.96-1.08
    x; drawing from a joint sample of only n (double sampling) gave 1.28-1.44 x; at most
    1.18 x asked. The table's own draw (``TABLE_PH``, systematic) has no sampling noise: each
    of the 12 joint cells is its noisy share to within about a record at each of the two
    draws, so every set's TVD is at most 12 / n (seeds 1-3 and 7: at most 3 / n)."""
    from unittest import mock

    from scipy import stats

    from dpsynth.table import steps
    from dpsynth.table.columns import ph_joint_draws

    assert ph_joint_draws(4000) == 80_000 and ph_joint_draws(10**6) == 2_000_000
    assert ph_joint_draws(3 * 10**6) == 3 * 10**6  # never fewer than n
    rng = np.random.default_rng(12)
    n = 4000
    a = rng.choice(["x", "y", "z"], n, p=[0.5, 0.3, 0.2])
    pb = {"x": [0.7, 0.1, 0.1, 0.1], "y": [0.1, 0.6, 0.2, 0.1], "z": [0.25] * 4}
    b = np.array([rng.choice(["p", "q", "r", "s"], p=pb[v]) for v in a])
    frame = pd.DataFrame({"a": a, "b": b})
    real = frame.value_counts(normalize=True)
    tvd = {}
    for draw in ("iid", "systematic"):
        with warnings.catch_warnings(), mock.patch.dict(steps.TABLE_PH, draw=draw):
            warnings.simplefilter("ignore")
            rel = synthesize_table(
                frame, tomllib.loads(DOUBLE_SAMPLING_SPEC), 1000.0, m=30, seed=7,
                allow_large_epsilon=True,
            )  # fmt: skip
        tvd[draw] = [
            0.5 * g.value_counts(normalize=True).sub(real, fill_value=0).abs().sum()
            for _, g in rel.data.groupby("synthetic_set")[["a", "b"]]
        ]
    k = np.arange(n + 1)
    expected = sum(0.5 * (stats.binom.pmf(k, n, p) * np.abs(k - n * p)).sum() / n for p in real)
    assert np.mean(tvd["iid"]) / expected < 1.18, (np.mean(tvd["iid"]), expected)
    assert steps.TABLE_PH["draw"] == "systematic"
    assert max(tvd["systematic"]) <= 12 / n, max(tvd["systematic"])


def test_raked_shares_hit_the_target_marginal_and_keep_each_row():
    """Iterative proportional fitting: the parent cells' weights q give the target marginal
    (to 1e-9), rows still sum to 1, a zero share stays zero, a row of weight 0 is left as it
    is, and shares that already give the target are unchanged."""
    from dpsynth.table.steps import raked

    rng = np.random.default_rng(3)
    shares = rng.dirichlet(np.ones(4), size=5)
    shares[1, 2] = 0.0
    shares[1] /= shares[1].sum()
    q = np.array([0.3, 0.2, 0.0, 0.4, 0.1])
    target = np.array([0.1, 0.2, 0.3, 0.4])
    out = raked(shares, q, target)
    assert np.allclose(out.sum(axis=1), 1.0)
    assert np.allclose(q @ out, target, atol=1e-9)
    assert out[1, 2] == 0.0 and np.array_equal(out[2], shares[2])
    assert np.allclose(raked(shares, q, q @ shares), shares)


def test_ph_calibration_weight_is_the_inverse_noise_variance_weight():
    """The own histogram's weight: the joint's marginal sums P cells' Laplace noise at
    1 - c of the column's epsilon (variance P / (1 - c)^2 in units of one cell's at epsilon_j),
    the own histogram one cell's at c (1 / c^2). P = 16, c = 1/2: 64 / (64 + 4)."""
    from dpsynth.table.steps import ph_calibration_weight

    assert ph_calibration_weight(16, 0.5) == pytest.approx(64 / 68)
    assert ph_calibration_weight(1, 0.5) == pytest.approx(0.5)
    assert ph_calibration_weight(4, 0.2) == pytest.approx((4 / 0.64) / (4 / 0.64 + 25))
    assert ph_calibration_weight(100, 0.3) > ph_calibration_weight(10, 0.3)


CALIBRATED_PH_SPEC = {
    "neighbours": "substitution",
    "confidential": [
        {"name": name, "mechanism": "ph", "type": "categorical", "levels": list(levels)}
        for name, levels in (("a", "xyz"), ("c", "klmn"), ("b", "pqrstu"))
    ],
}
"""b drawn by PH given the level columns before it, a and c (12 parent cells)."""


def _calibrated_ph_frame(n: int = 4000) -> pd.DataFrame:
    """a (3 levels) and c (4 levels) independent, b (6 levels) depending on a."""
    rng = np.random.default_rng(21)
    a = rng.choice(["x", "y", "z"], n, p=[0.5, 0.3, 0.2])
    c = rng.choice(["k", "l", "m", "n"], n)
    pb = {"x": [0.5, 0.2, 0.1, 0.1, 0.05, 0.05], "y": [0.1, 0.5, 0.2, 0.1, 0.05, 0.05]}
    pb["z"] = [1 / 6] * 6
    b = np.array([rng.choice(list("pqrstu"), p=pb[v]) for v in a])
    return pd.DataFrame({"a": a, "c": c, "b": b})


def test_calibrated_ph_given_parents_has_a_closer_marginal_and_reports_its_parts():
    """b drawn given a and c (12 parent cells) with calibrate_share 0.5: its own marginal
    is the inverse-variance blend of its own histogram and the joint's (weight 0.96 on its
    own), each set raked to it. Over 20 sets at epsilon 0.1 per set and column (Laplace
    scale 20 on counts of 4,000 records), b's mean one-way TVD was 0.56-0.67 x the
    uncalibrated draw's at seeds 1-8 (0.59 at seed 5); at most 0.8 x asked. The report's parts add up to the column's epsilon,
    and a's and b's dependence is kept (P(b = p | a = x) within 0.1 of the data's)."""
    from dpsynth.table.steps import ph_calibration_weight

    frame = _calibrated_ph_frame()
    plain = copy.deepcopy(CALIBRATED_PH_SPEC)
    calibrated = copy.deepcopy(plain)
    calibrated["confidential"][2]["calibrate_share"] = 0.5
    real = frame["b"].value_counts(normalize=True)
    mean_tvd, rels = [], []
    for spec in (plain, calibrated):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = synthesize_table(frame, spec, 6.0, m=20, seed=5)
        tvd = [
            0.5 * g.value_counts(normalize=True).sub(real, fill_value=0).abs().sum()
            for _, g in rel.data.groupby("synthetic_set")["b"]
        ]
        mean_tvd.append(np.mean(tvd))
        rels.append(rel)
    assert mean_tvd[1] / mean_tvd[0] < 0.8, mean_tvd
    b = rels[1].report["confidential_columns"][2]
    cal = b["calibration"]
    assert (cal["bins"], cal["used_for"]) == (6, ["calibration"])
    assert cal["epsilon"] == pytest.approx(1.0) and cal["epsilon_of_the_fit"] == pytest.approx(1.0)
    assert cal["weight_on_own_histogram"] == pytest.approx(ph_calibration_weight(12, 0.5))
    assert b["epsilon_allocated"] == pytest.approx(2.0)
    assert b["ledger"]["total"] == pytest.approx(2.0)
    assert rels[1].report["if_unseeded"] == {"guarantee": "DP", "epsilon": 6.0}
    first = rels[1].data[rels[1].data["synthetic_set"] == 1]
    kept = (first.loc[first["a"] == "x", "b"] == "p").mean()
    assert abs(kept - (frame.loc[frame["a"] == "x", "b"] == "p").mean()) < 0.1


INDICATOR_SPEC = """
neighbours = "substitution"

[[confidential]]
name = "grp"
mechanism = "ph"
type = "binary"
levels = ["a", "b"]

[[confidential]]
name = "val"
model = "beta-regression"
bounds = [0, 1]
missing = "indicator"
"""


def test_missingness_indicator_is_a_ph_column_given_the_level_columns(tmp_path):
    """The indicator of a column with missing values is drawn by PH given the level columns
    before it (a censored logistic fit at half a share favoured the majority level). In the
    data 60% of group a and 20% of group b miss their value; at epsilon 6 (the indicator's
    1.5: Laplace scale 1.3 on counts of hundreds) each group's synthetic missing share must
    be within 0.08 of the data's (binomial sd about 0.03 on 300 records per group)."""
    rng = np.random.default_rng(21)
    grp = rng.choice(["a", "b"], 600)
    val = rng.beta(2, 3, 600)
    val[rng.uniform(size=600) < np.where(grp == "a", 0.6, 0.2)] = np.nan
    frame = pd.DataFrame({"grp": grp, "val": val})
    spec = tmp_path / "ind.toml"
    spec.write_text(INDICATOR_SPEC)
    order = load_spec(spec).order()
    assert [(c.name, c.mechanism, c.model) for c in order[1:]] == [
        ("val_missing", "ph", None),
        ("val", "censor-uw", "beta-regression"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, 6.0, seed=3, allow_large_epsilon=True)
    cols = {c["column"]: c for c in rel.report["confidential_columns"]}
    assert cols["val_missing"]["predecessors"] == ["grp"]
    assert "precision" in cols["val"]["calibration"]["dispersion"]  # calibrate_dispersion
    real = frame["val"].isna().groupby(frame["grp"]).mean()
    syn = rel.data["val"].isna().groupby(rel.data["grp"]).mean()
    assert (syn - real).abs().max() < 0.08, (syn, real)
    assert rel.data["val"].isna().equals(rel.data["val_missing"] == 1)


MISSING_LEVEL_SPEC = """
neighbours = "substitution"

[[confidential]]
name = "lang"
mechanism = "ph"
type = "categorical"
levels = ["en", "fr", "other"]
missing = "level"

[[confidential]]
name = "flag"
mechanism = "ph"
type = "binary"
levels = ["no", "yes"]
missing = "level"
"""


def test_missing_level_counts_missing_as_one_more_public_level(tmp_path):
    """``missing = "level"`` on a PH binary or categorical column: missing is one more public
    level ("<missing>", last; a binary column becomes three cells), written back as missing.
    In the data 10% of lang is missing and flag is missing for 30% of the records whose lang
    is missing (5% otherwise); at epsilon 20 each synthetic share must be within 0.03 of the
    data's (binomial sd about 0.007 on 2,000 records; 0.035 for the 200 missing lang)."""
    from dpsynth.table.spec import MISSING_LEVEL

    spec = load_spec(tomllib.loads(MISSING_LEVEL_SPEC))
    lang, flag = spec.order()
    assert lang.levels == ("en", "fr", "other", MISSING_LEVEL) and lang.public_levels[-1] == "other"
    assert (flag.type, flag.levels) == ("categorical", ("no", "yes", MISSING_LEVEL))
    rng = np.random.default_rng(30)
    code = rng.choice(4, 2000, p=[0.6, 0.2, 0.1, 0.1])
    lang_v = np.array(["en", "fr", "other", None], dtype=object)[code]
    flag_v = rng.choice(["no", "yes"], 2000).astype(object)
    flag_v[rng.uniform(size=2000) < np.where(code == 3, 0.3, 0.05)] = None
    frame = pd.DataFrame({"lang": lang_v, "flag": flag_v})
    before = frame.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the known seed
        rel = synthesize_table(frame, spec, 40.0, seed=2, allow_large_epsilon=True)
    syn = rel.data
    assert set(syn["lang"].dropna()) <= {"en", "fr", "other"}
    assert MISSING_LEVEL not in set(syn["flag"].dropna())
    assert abs(syn["lang"].isna().mean() - frame["lang"].isna().mean()) < 0.03
    real = frame["flag"].isna().groupby(frame["lang"].isna()).mean()
    fake = syn["flag"].isna().groupby(syn["lang"].isna()).mean()
    assert (fake - real).abs().max() < 0.1, (fake, real)
    cols = {c["column"]: c for c in rel.report["confidential_columns"]}
    assert cols["flag"]["predecessors"] == ["lang"] and cols["lang"]["levels"][-1] == MISSING_LEVEL
    assert rel.diagnostics["verdict"]["verdict"] in ("good", "fair", "poor")
    pd.testing.assert_frame_equal(frame, before)  # input untouched


def test_calibrated_intercepts_hit_the_shares_and_keep_the_slopes():
    """Known answer: after the shift the mean level probabilities over the design equal the
    target shares (to 1e-6), the slopes are untouched; logistic and a 3-level categorical."""
    from scipy.special import expit, softmax

    from dpsynth.table.steps import calibrated_intercepts

    rng = np.random.default_rng(3)
    X = np.column_stack([np.ones(500), rng.uniform(size=(500, 2))])
    beta = calibrated_intercepts(np.array([-2.0, 1.5, -0.7]), X, np.array([0.6, 0.4]))
    assert expit(X @ beta).mean() == pytest.approx(0.4, abs=1e-6)
    np.testing.assert_array_equal(beta[1:], [1.5, -0.7])
    B = np.array([[0.5, -1.0], [2.0, 0.3], [-1.0, 1.0]])
    out = calibrated_intercepts(B, X, np.array([0.2, 0.5, 0.3]))
    probs = softmax(np.column_stack([np.zeros(500), X @ out]), axis=1).mean(axis=0)
    np.testing.assert_allclose(probs, [0.2, 0.5, 0.3], atol=1e-6)
    np.testing.assert_array_equal(out[1:], B[1:])


@pytest.mark.slow
def test_negbin_column_fits_at_its_centres_phi_and_keeps_mean_and_dependence():
    """A negative binomial count (mean about 2.6, rising with the public x; 1,500 records)
    at epsilon 3: calibrated and centred by default, its fit takes the centre's phi as known
    (the report says so and gives the centre), the release is DP, the synthetic mean is
    within 20% of the data's and the counts rise with x about as the data's do (rank
    correlation within 0.15 of the data's). Measured once (seed 3): mean 2.65 against 2.61,
    rank correlations 0.30 against 0.31; with calibrate_dispersion = false (phi fitted, the
    draw's own) 0.58, the dependence of a too precise censored fit."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, 1500)
    mu = np.exp(0.3 + 1.2 * x)
    frame = pd.DataFrame({"x": x, "visits": np.minimum(rng.negative_binomial(2, 2 / (2 + mu)), 15)})
    spec = {
        "public": [{"name": "x", "type": "continuous", "bounds": [0, 1]}],
        "confidential": [{"name": "visits", "model": "negbin", "bounds": [0, 15]}],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the known seed
        rel = synthesize_table(frame, spec, 3.0, seed=3)
    col = rel.report["confidential_columns"][0]
    assert "dispersion was fixed at its centre's value" in col["calibration"]["dispersion"]
    assert col["tuning"]["centring"]["phi"] > 0
    assert rel.report["if_unseeded"] == {"guarantee": "DP", "epsilon": 3.0}
    syn = rel.data
    assert abs(syn["visits"].mean() / frame["visits"].mean() - 1) < 0.2, syn["visits"].mean()
    real = frame["visits"].corr(frame["x"], method="spearman")
    fake = syn["visits"].corr(syn["x"], method="spearman")
    assert abs(fake - real) < 0.15, (fake, real)


def _count_level_table(n: int = 1200, seed: int = 5) -> pd.DataFrame:
    """A public x in [0, 1], a count visits ~ Poisson(exp(0.2 + 0.6 x)) (mean about 1.6) on
    [0, 8] and a binary insured ~ Bernoulli(expit(-0.8 + x)) (share about 0.42)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    visits = np.minimum(rng.poisson(np.exp(0.2 + 0.6 * x)), 8)
    insured = (rng.uniform(size=n) < 1 / (1 + np.exp(0.8 - x))).astype(int)
    return pd.DataFrame({"x": x, "visits": visits, "insured": insured})


COUNT_LEVEL_SPEC = {
    "public": [{"name": "x", "type": "continuous", "bounds": [0, 1]}],
    "confidential": [
        {"name": "visits", "model": "poisson", "bounds": [0, 8]},
        {"name": "insured", "model": "logistic", "levels": [0, 1], "mechanism": "censor-uw"},
    ],
}


CENTRED_CHAINS = Sampler(chains=4, iter_warmup=2000, iter_sampling=3000, adapt_delta=0.95)
"""At epsilon 0.35 a fit the table's default 2 x (1000 + 2000) left the count column at max
R-hat 1.0100x (seed 5), on the gate; with 4 chains the gate has a margin."""


@pytest.mark.slow
@pytest.mark.skipif(not _has_model("logistic"), reason="the outcome models are not available")
def test_count_and_logistic_columns_centred_at_their_marginal_by_default():
    """At epsilon 0.5 a column (1,200 records), the default marginal centring and calibration
    keep a Poisson column's mean within 25% and a logistic column's share within 0.1 of the
    data's (centred but uncalibrated, the logistic share was 0.20 against 0.44: at a small
    bound the clamp still favours the majority level); the paper's uncentred censoring
    (centring = "none", no ``debias``) draws the count column almost all zeros (its mean
    below a third of the data's): every record with y > 0 sits at the censoring bound once
    the rate is small, and the zeros pull it to 0. Seed 6, the count column's draw
    bias-corrected (``debias``, the default): means 1.60 against 1.60, shares 0.44 against
    0.44 (uncentred mean 0.02 at seed 5, before ``debias``). Not asserted: the logistic
    column's slope in x. Every one of its records is censored at this bound, so the slope
    is its centre's and the prior's; it fell with x at seeds 6 and 7 (it rose at seed 5
    before the count column was corrected; seed 5 now leaves the logistic fit at max R-hat
    1.0116, over the gate).
    A count column is the poisson-regression program (independent normal priors): the
    paper's hierarchical prior made divergent transitions under so weak a likelihood."""
    frame = _count_level_table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, COUNT_LEVEL_SPEC, 1.0, seed=6, sampler=CENTRED_CHAINS)
        spec = copy.deepcopy(COUNT_LEVEL_SPEC)
        spec["confidential"][0].update(centring="none", calibrate_bins=0, debias=False)
        uncentred = synthesize_table(frame[["x", "visits"]], {**spec, "confidential":
                                     spec["confidential"][:1]}, 0.5, seed=5)  # fmt: skip
    cols = rel.report["confidential_columns"]
    assert [c["model"] for c in cols] == ["poisson-regression", "logistic"]
    assert [c["calibration"]["used_for"] for c in cols] == [["calibration", "centring"]] * 2
    assert [c["calibration"]["bins"] for c in cols] == [9, 2]
    assert ["debias" in c for c in cols] == [True, False]  # the count column's draw, corrected
    assert rel.report["if_unseeded"] == {"guarantee": "DP", "epsilon": 1.0}
    syn = rel.data
    assert abs(syn["visits"].mean() / frame["visits"].mean() - 1) < 0.25, syn["visits"].mean()
    assert abs(syn["insured"].mean() - frame["insured"].mean()) < 0.1, syn["insured"].mean()
    assert uncentred.data["visits"].mean() < frame["visits"].mean() / 3
