"""The guidance page quotes notebook 09's committed paper-scale numbers, never a smoke test."""

from __future__ import annotations

import pandas as pd

from dpsynth.studies import real_data, results


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [
        {
            "model": "-",
            "mechanism": "Data",
            "epsilon": 0,
            "set": 1,
            "mean": 2.0,
            "zero_share": 0.4,
            "max_ecdf": 0.0,
        }
    ]
    for j in (1, 2):
        for model, mech in (
            ("-", "ph"),
            ("-", "opendp-histogram"),
            ("negbin", "censor-uw"),
            ("negbin", "censor-uw/reference"),
        ):
            rows.append(
                {
                    "model": model,
                    "mechanism": mech,
                    "epsilon": 5.0,
                    "set": j,
                    "mean": 2.0 + j / 10,
                    "zero_share": 0.4,
                    "max_ecdf": 0.05 * j,
                }
            )
    reg = pd.DataFrame(
        [
            {
                "mechanism": m,
                "epsilon": 5.0,
                "set": j,
                "ci_overlap": 0.5 + j / 10,
                "mean": 2.0,
                "zero_share": 0.4,
                "max_ecdf": 0.1,
            }
            for m in ("opendp-table", "censor-uw/reference", "unweighted")
            for j in (1, 2)
        ]
    )
    return pd.DataFrame(rows), reg


def test_nothing_committed_says_so_and_quotes_no_number(tmp_path, monkeypatch):
    monkeypatch.setenv(results.RESULTS_ENV_VAR, str(tmp_path))
    tables, numbers, meta = real_data.committed_guidance()
    assert meta == {}
    assert numbers["ref_mean"] == real_data.NOT_MEASURED
    assert numbers["profile"] == "paper"
    assert "not yet measured" in tables["count_numbers"].iloc[0, 0]


def test_a_paper_run_commits_and_the_page_reads_it_back(tmp_path, monkeypatch):
    monkeypatch.setenv(results.RESULTS_ENV_VAR, str(tmp_path))
    counts, reg = _frames()
    ci = real_data.settings("ci")
    assert not real_data.publish_guidance(counts, reg, ci).written  # a smoke test is not kept
    assert real_data.committed_guidance()[1]["ref_mean"] == real_data.NOT_MEASURED
    paper = real_data.settings("paper")
    assert real_data.publish_guidance(counts, reg, paper).written
    tables, numbers, meta = real_data.committed_guidance()
    assert meta["settings"]["sets"] == paper["sets"]
    assert numbers["ref_mean"].startswith("2.150\u00a0±\u00a0")  # never wraps at the ±
    assert numbers["table_overlap"].startswith("0.650")
    assert set(tables) == {"count_numbers", "regression_numbers"}
