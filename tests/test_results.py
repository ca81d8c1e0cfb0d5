"""Committed paper-scale results (``results/<notebook stem>/``) and the code that writes them.

* ``save`` / ``load`` / ``paper_scale`` round trips in a temporary results root.
* Drift: a committed table must stay what the code produces. Where a table is cheap to
  recompute (modips Section 5.2's Table 1 at 200 repetitions, a few seconds), it is
  recomputed and compared with the committed 5,000-repetition values within 4 combined
  binomial standard errors; a committed table that drifted (code changed its meaning or its
  seeds' results) fails. The two replicate studies of the Stan mechanisms (notebooks 01 and
  06) are rerun at R = 2 with their committed paper settings, and every Monte Carlo mean of
  the committed summary must lie within 4 standard errors of the difference
  (se_committed * sqrt(1 + R_committed / 2)) of the rerun's. The other Stan notebooks
  (02-05, one database each) take minutes to hours of MCMC: their files' structure only.
* A notebook without committed results is skipped, saying so.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.studies import results

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "results"
STEMS = (
    "01_beta_censoring",
    "02_sdr_censoring",
    "03_vector_weighting",
    "04_reweighting",
    "05_sdr_salary",
    "06_local_to_global",
    "07_modips_inference",
)


@pytest.fixture()
def tmp_root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(results.RESULTS_ENV_VAR, str(tmp_path))
    return tmp_path


PROFILES = {"paper": {"R": 100, "n": 2000, "n_jobs": 2}, "ci": {"R": 2, "n": 300, "n_jobs": 1}}


def test_is_paper_run_ignores_worker_counts_only() -> None:
    assert results.is_paper_run({**PROFILES["paper"], "profile": "paper"}, PROFILES)
    assert results.is_paper_run({"R": 100, "n": 2000, "n_jobs": 1, "profile": "x"}, PROFILES)
    assert not results.is_paper_run({**PROFILES["paper"], "R": 10}, PROFILES)
    assert not results.is_paper_run({**PROFILES["ci"], "profile": "ci"}, PROFILES)
    assert results.is_paper_run({"m": (1, 2), "k": 1}, {"paper": {"m": [1, 2], "k": 1}})


def test_save_load_round_trip_is_deterministic(tmp_root: Path) -> None:
    table = pd.DataFrame(
        {"mean": [1 / 3, 2.0], "label": ["a", "b"]},
        index=pd.MultiIndex.from_tuples([(5.0, "x"), (4.0, "y")], names=["eps", "mech"]),
    )
    cfg = {**PROFILES["paper"], "profile": "paper"}
    out = results.save("01_demo", {"t": table}, cfg, date="2024-01-02")
    first = (out / "t.csv").read_bytes()
    results.save("01_demo", {"t": table}, {**cfg, "n_jobs": 7}, date="2024-01-02")
    assert (out / "t.csv").read_bytes() == first  # same tables -> same bytes
    meta = json.loads((out / "meta.json").read_text())
    assert meta["date"] == "2024-01-02" and "n_jobs" not in meta["settings"]
    back = results.load("01_demo")
    assert back.available and back.label == "dpsynth at paper scale (committed, 2024-01-02)"
    got = back.get("t")
    assert got.index.nlevels == 2 and got.loc[(5.0, "x"), "label"] == "a"
    assert got.loc[(5.0, "x"), "mean"] == pytest.approx(1 / 3, rel=1e-9)


def test_paper_scale_writes_only_under_the_paper_profile(tmp_root: Path) -> None:
    table = pd.DataFrame({"value": [1.0]}, index=pd.Index(["q"], name="quantity"))
    ci = results.paper_scale("02_demo", {"summary": table}, {**PROFILES["ci"]}, PROFILES)
    assert not ci.available and not ci.written
    assert "no committed paper-scale results yet" in ci.note and "02_demo" in ci.note
    assert not (tmp_root / "02_demo").exists()
    paper = results.paper_scale("02_demo", {"summary": table}, dict(PROFILES["paper"]), PROFILES)
    assert paper.written and "wrote 1" in paper.note
    again = results.paper_scale("02_demo", {"summary": table * 5}, dict(PROFILES["ci"]), PROFILES)
    assert again.available and not again.written and again.get("summary")["value"].iloc[0] == 1.0


def test_run_label() -> None:
    cfg = {"profile": "ci", "R": 2, "n": 300}
    assert results.run_label(cfg, R=None, n=None) == "this run (ci profile: R = 2, n = 300)"
    assert results.run_label({"profile": "paper"}) == "this run (paper profile)"


def test_results_dir_rejects_paths() -> None:
    for bad in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(ValueError):
            results.results_dir(bad)


# ------------------------------------------------------------------ the committed results


def _committed(stem: str) -> results.PaperScale:
    where = COMMITTED / stem
    if not (where / "meta.json").is_file():
        pytest.skip(f"no committed paper-scale results for {stem} (results/{stem}/ is empty)")
    got = results.load(stem)
    assert got.available, f"results/{stem}/meta.json lists no readable table"
    return got


@pytest.fixture(autouse=True)
def _committed_root(monkeypatch) -> None:
    monkeypatch.delenv(results.RESULTS_ENV_VAR, raising=False)


@pytest.mark.parametrize("stem", STEMS)
def test_committed_results_are_well_formed(stem: str) -> None:
    got = _committed(stem)
    meta = got.meta
    assert meta["stem"] == stem and "profile" not in meta["settings"]
    assert set(meta["tables"]) == set(got.tables) and "summary" in got.tables
    summary = got.get("summary")
    assert list(summary.columns) == ["value", "se", "n", "text"]
    assert summary.index.is_unique


def test_modips_table1_has_not_drifted() -> None:
    """Table 1 recomputed at 200 repetitions agrees with the committed 5,000 within 4 SE."""
    from dpsynth.studies import modips_sections as sm

    got = _committed("07_modips_inference")
    committed = got.get("table1")
    settings = got.meta["settings"]
    cfg = sm.settings("paper", reps=200, workers=1)
    assert list(cfg["table_epsilons"]) == settings["table_epsilons"]
    assert cfg["table_m"] == settings["table_m"] and cfg["seed"] == settings["seed"]
    fresh = sm.table1(sm.section52(cfg))
    fresh.columns = [" | ".join(c) for c in fresh.columns]
    keys = ["data", "epsilon", "n"]
    assert (
        fresh.index.to_frame()[keys].values.tolist()
        == committed.index.to_frame()[keys].values.tolist()
    ), "Table 1's rows changed"
    run_cols = [c for c in committed.columns if c.endswith("| run")]
    assert run_cols and set(run_cols) <= set(fresh.columns)
    reps_committed = int(settings["reps"])
    worst = 0.0
    for col in run_cols:
        a, b = committed[col].to_numpy(float), fresh[col].to_numpy(float)
        # binomial errors of both runs, each with its Agresti-Coull adjusted share
        qa = (np.clip(a, 0, 1) * reps_committed + 2) / (reps_committed + 4)
        qb = (np.clip(b, 0, 1) * 200 + 2) / (200 + 4)
        se = np.sqrt(qa * (1 - qa) / reps_committed + qb * (1 - qb) / 200)
        z = np.abs(a - b) / se
        worst = max(worst, float(np.nanmax(z)))
        assert np.all(z <= 4.0), f"{col}: committed {a[z > 4]} vs recomputed {b[z > 4]}"
    assert worst > 0  # the comparison compared something


def test_modips_summary_matches_its_table1() -> None:
    """The committed summary's Table 1 picks are the committed Table 1's cells."""
    got = _committed("07_modips_inference")
    summary, table = got.get("summary"), got.get("table1")
    thm7 = table["thm7 | run"]
    row = thm7.xs(("gaussian", 0.5, 10), level=("data", "epsilon", "n"))
    assert summary.loc["t1_gau_eps05_n10_thm7", "value"] == pytest.approx(float(row.iloc[0]))


def test_rewriting_identical_tables_keeps_the_date(tmp_root: Path) -> None:
    table = pd.DataFrame({"value": [0.5]}, index=pd.Index(["q"], name="quantity"))
    cfg = dict(PROFILES["paper"])
    results.save("03_demo", {"summary": table}, cfg, date="2020-05-06")
    results.save("03_demo", {"summary": table}, {**cfg, "n_jobs": 1})  # workers do not count
    assert results.load("03_demo").meta["date"] == "2020-05-06"
    results.save("03_demo", {"summary": table + 1}, cfg)
    assert results.load("03_demo").meta["date"] != "2020-05-06"


# ----------------------------------------------------------- drift of the Stan studies (R = 2)

R_DRIFT = 2


def _assert_summary_close(stem: str, fresh: pd.DataFrame, committed: results.PaperScale) -> None:
    """Every committed Monte Carlo mean (a row with se > 0) within 4 SE of the difference.

    Order statistics and spreads of the full Table 1 / S4 rows (``t1_*``, ``s4_*`` other
    than the means) are skipped: a minimum over R = 2 replicates is not an estimate of the
    minimum over 100."""
    old = committed.get("summary")
    r_committed = int(committed.meta["settings"]["R"])
    checked = []
    for q in old.index.intersection(fresh.index):
        if str(q).startswith(("t1_", "s4_")) and "_mean" not in str(q):
            continue
        c, se = float(old.at[q, "value"]), float(old.at[q, "se"])
        f = pd.to_numeric(fresh.at[q, "value"], errors="coerce")
        if not (np.isfinite(se) and se > 0 and np.isfinite(f)):
            continue
        tol = 4.0 * se * np.sqrt(1.0 + r_committed / R_DRIFT)
        assert abs(f - c) <= tol, f"{stem} {q}: committed {c:.4g}, rerun {f:.4g} (tol {tol:.3g})"
        checked.append(q)
    assert len(checked) >= 3, f"{stem}: only {checked} comparable"


@pytest.mark.slow
def test_beta_censoring_summary_has_not_drifted() -> None:
    from dpsynth.studies import censoring, reproduction

    got = _committed("01_beta_censoring")
    s = censoring.settings("paper", R=R_DRIFT, n_jobs=2)
    for key in (
        "n",
        "epsilons",
        "chains",
        "iter_warmup",
        "iter_sampling",
        "seed",
        "downscale",
        "weighted_e_rule",
        "censor_w_reweight",
        "censor_w_k",
    ):
        assert s[key] == got.meta["settings"].get(key), f"the paper profile's {key} changed"
    frame = censoring.run_beta_study(s, cache_dir=None)
    fresh = reproduction.summary_frame(censoring.beta_summary(frame, s["n"]))
    _assert_summary_close("01_beta_censoring", fresh, got)


@pytest.mark.slow
def test_local_to_global_bounds_have_not_drifted() -> None:
    """Appendix 6's committed tables hold the min, median and max over R = 100 databases of
    each synthesizer's local bound: the rerun's bounds (R = 2) must fall inside the
    committed [min, max] widened by a quarter of its spread on each side."""
    from dpsynth.studies import vector_weighted as vw

    got = _committed("06_local_to_global")
    cfg = vw.settings("paper", R=R_DRIFT, n_jobs=2)
    for key in ("n", "chains", "iter_warmup", "iter_sampling", "seed", "k"):
        assert cfg[key] == got.meta["settings"][key], f"the paper profile's {key} changed"
    checked = 0
    for gen in vw.GENERATORS:
        table = got.get(gen)
        bounds, _ = vw.local_to_global(gen, cfg, cache_dir=None)
        for name, b in bounds.groupby("synthesizer"):
            if name not in table.index:
                continue
            lo, hi = float(table.at[name, "min"]), float(table.at[name, "max"])
            pad = 0.25 * (hi - lo)
            v = b.lipschitz.to_numpy(float)
            assert np.all((v >= lo - pad) & (v <= hi + pad)), f"{gen} {name}: {v} vs [{lo}, {hi}]"
            checked += 1
    assert checked >= 4
