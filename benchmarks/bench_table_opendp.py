"""One OpenDP MST or AIM synthesis of a table (the comparison of issue 29, item 6).

Runs in its own environment (``opendp[mbi]`` pins JAX and Private-PGM; dpsynth's venv
does not carry them), started by ``bench_table.py`` once per (method, epsilon, replicate):

    /work/bench-venv/bin/python benchmarks/bench_table_opendp.py --data TABLE.csv
        --domain DOMAIN.json --algorithm mst|aim --epsilon 3 --out SYNTH.csv

Through OpenDP's own contingency-table API (``dp.mbi.make_contingency_table`` via the
``Context`` query ``.contingency_table``, MST of McKenna, Sheldon and Miklau 2021 and AIM
of McKenna et al. 2022): every column has public keys (levels) or public cuts (bins), so
the release is pure epsilon-DP with delta = 0 (OpenDP refuses delta > 0 then). The privacy
unit is ``contributions = 2`` (symmetric distance 2), which covers one substituted record:
the same neighbour relation as dpsynth's table release (substitution).

Records come from ``model.synthetic_data(rows, method="sample")`` (the default
``"round"`` invents correlations between conditionally independent columns). A binned
column comes out as a bin and is mapped back uniformly within its public bin (integers
uniformly over the bin's integers); a keyed column's null cell (OpenDP adds one per keyed
column, for values outside the keys) is mapped to a public level drawn uniformly, and how
often that happened is reported. MST's selection step asks a relative 1e-9 less than its
share (:func:`backed_off_mst_select`: its floating-point composition can otherwise exceed
the share and be refused, an open OpenDP issue). AIM can fail near the end of its budget on a negative
noise scale (an open OpenDP issue): :class:`StoppingAIM` catches the failure in its loop
and stops there with the marginals measured so far (less budget spent, never more); the
child reports ``stopped_early``. Prints one JSON line: status, seconds, peak MB, notes.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import opendp.prelude as dp
import polars as pl
from opendp.extras.mbi import _aim, _mst

STOPS: list[str] = []
MST_BACKOFF = 1e-9
"""The relative part of MST's selection share left unspent (:func:`backed_off_mst_select`)."""
_MST_SELECT = _mst._make_mst_select


def backed_off_mst_select(*args: Any, d_out: float, **kwargs: Any):
    """OpenDP 0.16's MST selection step, asked for its share less a relative 1e-9.

    Its composition of ``num_selections`` noisy-max steps can add up, in floating point,
    to a hair above the share MST gave it, and the outer composition then refuses with
    "insufficient budget for query" (opendp/opendp#2789, open; the maintainers suggest
    backing off). Spending less than the share is never a privacy cost; the utility cost
    of 1e-9 of a tenth of epsilon is nil.
    """
    return _MST_SELECT(*args, d_out=d_out * (1 - MST_BACKOFF), **kwargs)


@dataclass(frozen=True)
class StoppingAIM(dp.mbi.AIM):
    """OpenDP's AIM whose round loop stops at the first failing round (budget left unspent).

    The loop is OpenDP 0.16's ``AIM.make_marginals`` with one ``try`` around a round.
    """

    def make_marginals(
        self, input_domain, input_metric, output_measure, d_in, d_out, *, marginals, model
    ):  # noqa: D102
        queries = _aim._expand_queries(self.queries, input_domain.columns)
        algorithm = replace(self, queries=queries)
        lp_metric = _aim.get_associated_metric(output_measure)
        t_marginals = _aim.make_stable_marginals(
            input_domain, input_metric, lp_metric, [q.by for q in queries]
        )
        d_marginals = t_marginals.map(d_in)
        rounds = algorithm.rounds or (16 * len(input_domain.columns))

        def function(qbl):
            current_model, current_marginals = model, marginals.copy()
            d_step, d_spent = d_out / rounds, 0.0
            while d_step:
                try:
                    m_step = _aim._make_aim_marginal(
                        *t_marginals.output_space,
                        output_measure,
                        t_marginals.map(d_in),
                        d_step,
                        marginals=current_marginals,
                        model=current_model,
                        max_size=algorithm.max_size * (d_spent + d_step) / d_out,
                        algorithm=algorithm,
                    )
                    if not m_step:
                        break
                    current_marginals, current_model, significant = qbl(m_step)
                except Exception as exc:  # the open OpenDP issue: a negative noise scale
                    STOPS.append(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
                    break
                if not significant:
                    d_step *= 4
                d_spent = qbl.privacy_loss(d_marginals)
                d_step = min(d_step, max(_aim.prior(d_out - d_spent), 0))
            return current_marginals, current_model

        return (
            t_marginals
            >> _aim.make_privacy_filter(
                _aim.make_fully_adaptive_composition(*t_marginals.output_space, output_measure),
                d_in=d_marginals,
                d_out=d_out,
            )
            >> _aim._new_pure_function(function)
        )


def release_table(data: pl.LazyFrame, domain: dict[str, Any], algorithm: str, epsilon: float):
    """The OpenDP ContingencyTable: public keys and cuts for every column, pure epsilon."""
    dp.enable_features("contrib")
    keys = {c: d["levels"] for c, d in domain.items() if "levels" in d}
    cuts = {c: d["edges"][1:-1] for c, d in domain.items() if "edges" in d}
    context = dp.Context.compositor(
        data=data,
        privacy_unit=dp.unit_of(contributions=2),
        privacy_loss=dp.loss_of(epsilon=epsilon),
    )
    _mst._make_mst_select = backed_off_mst_select  # MST's own call site reads the module's
    algo = dp.mbi.MST() if algorithm == "mst" else StoppingAIM()
    query = (
        context.query(epsilon=epsilon)
        .select(*domain)
        .contingency_table(keys=keys, cuts=cuts, algorithm=algo)
    )
    return query.release()


def records(table: Any, domain: dict[str, Any], rows: int, rng: np.random.Generator):
    """Sampled records (``method="sample"``) as values: bins uniformly within, nulls to a level."""
    np.random.seed(int(rng.integers(2**31)))  # Private-PGM samples with numpy's global RNG
    index = table.model.synthetic_data(rows, "sample").df
    out, nulls = {}, 0
    for col, d in domain.items():
        idx = index[col].to_numpy()
        if "edges" in d:
            lo, hi = np.asarray(d["edges"][:-1], float), np.asarray(d["edges"][1:], float)
            if d.get("integer"):
                first = np.where(idx == 0, lo[idx], np.floor(lo[idx]) + 1)
                out[col] = rng.integers(first.astype(int), np.floor(hi[idx]).astype(int) + 1)
            else:
                out[col] = rng.uniform(lo[idx], hi[idx])
            continue
        keys = table.keys[col].to_list()
        values = np.array([keys[i] for i in idx], dtype=object)
        missing = np.array([v is None for v in values])
        nulls += int(missing.sum())
        values[missing] = rng.choice(np.array(d["levels"], dtype=object), int(missing.sum()))
        out[col] = values.astype(type(d["levels"][0]))
    return out, nulls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--domain", required=True)
    parser.add_argument("--algorithm", choices=("mst", "aim"), required=True)
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--seed", type=int, default=None, help="for the record sampling only")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    domain = json.loads(Path(args.domain).read_text())
    schema = {
        c: (
            pl.Float64
            if d.get("kind") == "continuous"
            else pl.Int64
            if d.get("integer")
            else pl.String
        )
        for c, d in domain.items()
    }
    data = pl.scan_csv(args.data, schema_overrides=schema).select(list(domain))
    rows = data.select(pl.len()).collect().item()  # n is public under substitution
    start = time.perf_counter()
    status, release_s = "ok", float("nan")
    try:
        table = release_table(data, domain, args.algorithm, args.epsilon)
        release_s = time.perf_counter() - start
        synth, nulls = records(table, domain, rows, np.random.default_rng(args.seed))
        pl.DataFrame(synth).write_csv(args.out)
    except Exception as exc:  # reported, not hidden: the row says the run failed
        status, nulls = f"failed: {type(exc).__name__}: {' '.join(str(exc).split())[:400]}", 0
    seconds = time.perf_counter() - start
    peak = (
        max(
            resource.getrusage(w).ru_maxrss
            for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        / 1024
    )
    print(
        json.dumps(
            {
                "status": status,
                "seconds": seconds,
                "release_s": release_s,
                "peak_mb": peak,
                "stopped_early": "; ".join(STOPS),
                "null_cells": nulls,
            }
        )
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
