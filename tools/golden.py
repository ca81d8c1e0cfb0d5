"""Golden outputs: a handful of seeded releases whose outputs are recorded before a redesign.

Each case of :data:`CASES` makes one seeded release (or a plan, or a combine) and returns its
outputs; the recording, ``tests/golden/<case>.json``, holds

* ``data``: the synthetic data, every value rounded to 12 significant digits; a frame of more
  than :data:`MAX_VALUES` cells is recorded as the SHA-256 of its CSV at those 12 digits,
  with per-column summaries (n, mean, sd, min, max; level counts for a text column);
* ``report``: the public report without its volatile fields (:func:`clean_report`: package
  versions, hashes of programs and files, timings; paths are replaced by placeholders);
* ``machine``: where it was recorded (:func:`machine`). Numbers from Stan differ across
  processors and library builds, so ``tests/test_golden.py`` compares only on a machine with
  the same fingerprint, and skips, saying so, elsewhere.

Usage::

    .venv/bin/python tools/golden.py            # rerun every case, print the differences
    .venv/bin/python tools/golden.py --update   # rerun every case, (re)write the recordings
    .venv/bin/python tools/golden.py ph sbs     # only these cases

Exit status 0 when every case compared matches, 1 otherwise (and 0 after ``--update``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io as _io
import json
import math
import platform
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = ROOT / "tests" / "golden"
DIGITS = 12
"""Significant digits every recorded synthetic value is rounded to."""
RTOL = 1e-9
"""Relative tolerance of a float comparison on the same machine."""
MAX_VALUES = 1000
"""A frame with more cells than this is recorded as a hash plus summaries."""

if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from dpsynth.release.single import KnownSeedWarning  # noqa: E402
from dpsynth.sampler import Sampler  # noqa: E402

SAMPLER = Sampler(chains=2, iter_warmup=200, iter_sampling=200)
"""The fast tests' settings: convergence does not matter, a release is made whatever it is."""


# ----------------------------------------------------------------------------- data sets


def _beta_data() -> np.ndarray:
    """200 records from Beta(1.5, 1.5), seed 1 (the tests' ``beta_data``)."""
    return np.random.default_rng(1).beta(1.5, 1.5, 200)


def _incomes(n: int = 200, seed: int = 3) -> np.ndarray:
    """Log-normal incomes inside the public bounds [0, 1e5]."""
    return np.random.default_rng(seed).lognormal(10.0, 0.6, n).clip(0, 1e5)


def _gauss() -> np.ndarray:
    """200 records from N(1, 1), seed 3, clipped to the public bounds [-4, 4]."""
    return np.clip(np.random.default_rng(3).normal(1.0, 1.0, size=200), -4, 4)


def _table_frame(n: int = 300, seed: int = 29) -> pd.DataFrame:
    """Public age and region; confidential income (depends on age) and owner (on income);
    a few ages missing (public missing values stay missing)."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(20, 60, n)
    income = np.clip(np.exp(8 + 0.02 * (age - 40) + 0.5 * rng.normal(size=n)), 100, 50000)
    region = rng.choice(["n", "s", "e"], n)
    p_owner = 1 / (1 + np.exp(-(np.log(income) - 8)))
    owner = np.where(rng.uniform(size=n) < p_owner, "yes", "no")
    return pd.DataFrame({"age": age, "region": region, "income": income, "owner": owner})


TABLE_SPEC: dict[str, Any] = {
    "neighbours": "substitution",
    "public": [
        {"name": "age", "type": "continuous", "bounds": [16, 90]},
        {"name": "region", "type": "categorical", "levels": ["n", "s", "e"]},
    ],
    "confidential": [
        {
            "name": "income",
            "mechanism": "censor-uw",  # named: the recorded report predates the default rule
            "model": "lognormal-regression",
            "bounds": [100, 50000],
            "clamp": "hard",  # named: the recorded report predates the smooth default
        },
        {
            "name": "owner",
            "mechanism": "ph",
            "type": "binary",
            "levels": ["no", "yes"],
            "given": ["income"],
            "given_bins": 5,
        },
    ],
}
"""A public column pair, a model column and a histogram (PH) level column given it."""


# ----------------------------------------------------------------------------- the cases


def _release(y: Any, **kwargs: Any) -> dict[str, Any]:
    from dpsynth.release.single import synthesize

    rel = synthesize(y, sampler=SAMPLER, **kwargs)
    return {"data": rel.data, "report": rel.report}


def case_censor_uw_beta() -> dict[str, Any]:
    return _release(_beta_data(), model="beta", mechanism="censor-uw", epsilon=3.0, seed=101)


def case_censor_w_reference() -> dict[str, Any]:
    reference = np.random.default_rng(2).beta(1.5, 1.5, 200)  # a public, earlier database
    return _release(
        _beta_data(),
        model="beta",
        mechanism="censor-w",
        epsilon=3.0,
        reference=reference,
        seed=102,
    )


def case_ph() -> dict[str, Any]:
    y = np.random.default_rng(2).uniform(0, 10, 500)
    return _release(y, mechanism="ph", epsilon=1.0, bounds=(0, 10), seed=103)


def case_sbs() -> dict[str, Any]:
    return _release(
        _gauss(), mechanism="sbs", epsilon=2.0, bounds=(-4, 4), allocation=0.7, seed=104
    )


def case_weighted_e() -> dict[str, Any]:
    return _release(_beta_data(), model="beta", mechanism="weighted-e", epsilon=3.0, seed=105)


def case_lognormal_m2() -> dict[str, Any]:
    return _release(
        _incomes(), model="lognormal", mechanism="censor-uw", epsilon=4.0, m=2,
        bounds=(0.0, 1e5), seed=106,
    )  # fmt: skip


def case_beta_regression() -> dict[str, Any]:
    from dpsynth.models.catalogue import covariate_matrix

    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    X = covariate_matrix(frame, "x,g", None)
    return _release(
        _beta_data(), model="beta-regression", mechanism="censor-uw", epsilon=4.0,
        X=X, covariates=frame, seed=107,
    )  # fmt: skip


def case_pieces() -> dict[str, Any]:
    from dpsynth.engine import STAN_DIR
    from dpsynth.models import pieces

    model = pieces.from_pieces(STAN_DIR / "examples/pieces/normal_known_sd.pieces", grid_max=201)
    y = np.random.default_rng(12).normal(1.0, 1.0, 80)
    return _release(
        y, model=model, mechanism="censor-uw", epsilon=8.0, bounds=(-4.0, 6.0), seed=108
    )


def case_table() -> dict[str, Any]:
    from dpsynth.table.pipeline import synthesize_table

    rel = synthesize_table(_table_frame(), TABLE_SPEC, 6.0, seed=109, sampler=SAMPLER)
    return {"data": rel.data, "report": rel.report}


def case_plan() -> dict[str, Any]:
    from dpsynth.release.plan import plan

    table = plan(
        _incomes(400),
        model="lognormal",
        epsilon=5.0,
        m=2,
        bounds=(0.0, 1e5),
        mechanisms=("ph", "censor-uw", "censor-uw+reference", "censor-w"),
        sampler=SAMPLER,
        seed=110,
    )
    attrs = dict(table.attrs)
    # the plan's own timings (seconds per candidate) are volatile: dropped
    rows = table.drop(columns=["seconds"], errors="ignore")
    return {"data": rows, "report": {"attrs": attrs}}


def case_combine() -> dict[str, Any]:
    """The CLI end to end: a seeded SBS release of m = 5 sets, then ``combine --json`` (two
    rules) on its CSV, and the library's ``combine_frame`` on the same frame."""
    from dpsynth.cli.commands import main
    from dpsynth.mechanisms.inference import combine_frame

    def run(argv: list[str]) -> str:
        out, err = _io.StringIO(), _io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        if code != 0:
            raise RuntimeError(f"dpsynth {argv[0]} exited {code}: {err.getvalue()}")
        return out.getvalue()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        inp, out, rep = folder / "g.csv", folder / "synth.csv", folder / "report.json"
        pd.DataFrame({"y": _gauss()}).to_csv(inp, index=False)
        run(
            ["synthesize", str(inp), "--column", "y", "--mechanism", "sbs", "--bounds", "-4",
             "4", "--epsilon", "5", "--m", "5", "--seed", "111", "--out", str(out),
             "--report", str(rep), "--quiet"]
        )  # fmt: skip
        data = pd.read_csv(out)
        report = json.loads(rep.read_text())
        combined = {}
        for rule in ("thm7", "rubin"):
            text = run(["combine", str(out), "--column", "y", "--estimand", "mean",
                        "--rule", rule, "--json"])  # fmt: skip
            combined[rule] = json.loads(text)
        combined["library_thm7"] = combine_frame(data, "y", "mean").to_dict()
    return {"data": data, "report": {"synthesize": report, "combine": combined}}


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "censor_uw_beta": case_censor_uw_beta,
    "censor_w_reference": case_censor_w_reference,
    "ph": case_ph,
    "sbs": case_sbs,
    "weighted_e": case_weighted_e,
    "lognormal_m2": case_lognormal_m2,
    "beta_regression": case_beta_regression,
    "pieces": case_pieces,
    "table": case_table,
    "plan": case_plan,
    "combine": case_combine,
}
"""Case name -> a function making its outputs: ``{"data": frame, "report": dict}``."""


# ----------------------------------------------------------------------------- recording


def machine() -> dict[str, Any]:
    """Where the numbers come from: processor, its model, numpy, httpstan, the Stan backend."""
    from dpsynth import engine
    from dpsynth.io import package_version

    return {
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "numpy": package_version("numpy"),
        "httpstan": package_version("httpstan"),
        "backend": engine.choose_backend(),
    }


def _cpu_model() -> str | None:
    """The first processor's model name in /proc/cpuinfo, with its family and model numbers
    (a virtual machine may name only "AMD EPYC", whatever its generation and SIMD units)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or None
    numbers = [f"{k} {fields[k]}" for k in ("cpu family", "model") if fields.get(k)]
    return f"{name} ({', '.join(numbers)})" if name and numbers else name


VOLATILE_KEYS = frozenset(
    {"dpsynth_version", "versions", "python", "seconds", "timestamp", "date", "created"}
)
"""Report keys dropped before recording: provenance and timings, not outputs."""


def _volatile(key: str) -> bool:
    return key in VOLATILE_KEYS or key == "sha256" or key.endswith("_sha256")


def clean_report(obj: Any) -> Any:
    """The report without volatile fields: :data:`VOLATILE_KEYS`, every ``*sha256`` key
    (program and file hashes: they follow file contents and paths, not the release); paths
    of this checkout, the home folder and the temporary folder replaced by placeholders;
    numpy scalars and arrays as plain JSON values; non-finite floats as None."""
    if isinstance(obj, dict):
        return {str(k): clean_report(v) for k, v in obj.items() if not _volatile(str(k))}
    if isinstance(obj, list | tuple):
        return [clean_report(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return clean_report(obj.tolist())
    if isinstance(obj, np.generic):
        return clean_report(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, str):
        for path, name in (
            (str(ROOT), "<repo>"),
            (tempfile.gettempdir(), "<tmp>"),
            (str(Path.home()), "<home>"),
        ):
            obj = obj.replace(path, name)
        return obj
    return obj


def _value(v: Any) -> Any:
    """One cell as JSON: a float at :data:`DIGITS` significant digits, missing as None."""
    if v is None or (isinstance(v, float | np.floating) and not math.isfinite(v)):
        return None
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        return float(f"{float(v):.{DIGITS}g}")
    if isinstance(v, list | tuple | np.ndarray):
        return [_value(x) for x in v]
    if v is pd.NA or v is pd.NaT:
        return None
    return str(v)


def _summary(col: pd.Series) -> dict[str, Any]:
    numbers = pd.to_numeric(col, errors="coerce")
    if pd.api.types.is_numeric_dtype(col) or numbers.notna().sum() == col.notna().sum():
        x = numbers.to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        return {
            "n": int(x.size),
            "missing": int(col.isna().sum()),
            "mean": _value(x.mean()) if x.size else None,
            "sd": _value(x.std(ddof=1)) if x.size > 1 else None,
            "min": _value(x.min()) if x.size else None,
            "max": _value(x.max()) if x.size else None,
        }
    counts = col.astype("object").where(col.notna(), None).value_counts(dropna=False)
    return {
        "n": int(col.notna().sum()),
        "missing": int(col.isna().sum()),
        "levels": {str(k): int(v) for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))},
    }


def record_frame(frame: pd.DataFrame) -> dict[str, Any]:
    """A frame as JSON: its columns' values, or past :data:`MAX_VALUES` cells the SHA-256 of
    its CSV (values at :data:`DIGITS` significant digits) with per-column summaries."""
    frame = frame.reset_index(drop=True)
    out: dict[str, Any] = {"columns": [str(c) for c in frame.columns], "rows": len(frame)}
    if frame.size <= MAX_VALUES:
        out["values"] = {str(c): [_value(v) for v in frame[c].tolist()] for c in frame.columns}
        return out
    rounded = frame.copy()
    for c in rounded.columns:
        if pd.api.types.is_float_dtype(rounded[c]):
            rounded[c] = [_value(v) for v in rounded[c].tolist()]
    text = rounded.to_csv(index=False, float_format=f"%.{DIGITS}g", lineterminator="\n")
    out["csv_sha256_12_digits"] = hashlib.sha256(text.encode()).hexdigest()
    out["summary"] = {str(c): _summary(frame[c]) for c in frame.columns}
    return out


def run_case(name: str) -> dict[str, Any]:
    """Run one case (the known-seed warnings silenced) and return its recording."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KnownSeedWarning)
        outputs = CASES[name]()
    return {
        "case": name,
        "machine": machine(),
        "data": record_frame(outputs["data"]),
        "report": clean_report(outputs["report"]),
        "_seconds": round(time.perf_counter() - start, 2),  # not compared, not written
    }


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def load(name: str) -> dict[str, Any]:
    return json.loads(golden_path(name).read_text())


def write(record: dict[str, Any]) -> Path:
    path = golden_path(record["case"])
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {k: v for k, v in record.items() if not k.startswith("_")}
    path.write_text(json.dumps(body, indent=1, allow_nan=False) + "\n")
    return path


# ----------------------------------------------------------------------------- comparing


def differences(expected: Any, actual: Any, where: str = "", limit: int = 20) -> list[str]:
    """Where ``actual`` differs from ``expected`` (floats to :data:`RTOL`), at most ``limit``."""
    out: list[str] = []

    def walk(a: Any, b: Any, at: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if k not in b:
                    out.append(f"{at}.{k}: missing (expected {_short(a[k])})")
                elif k not in a:
                    out.append(f"{at}.{k}: unexpected {_short(b[k])}")
                else:
                    walk(a[k], b[k], f"{at}.{k}")
            return
        if isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{at}: length {len(b)}, expected {len(a)}")
                return
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{at}[{i}]")
            return
        numbers = (int, float)
        if (
            isinstance(a, numbers)
            and isinstance(b, numbers)
            and not isinstance(a, bool)
            and not isinstance(b, bool)
        ):
            if not math.isclose(a, b, rel_tol=RTOL, abs_tol=0.0):
                out.append(f"{at}: {b!r}, expected {a!r}")
            return
        if a != b or type(a) is not type(b):
            out.append(f"{at}: {_short(b)}, expected {_short(a)}")

    walk(expected, actual, where)
    return out


def _short(v: Any, n: int = 120) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= n else text[: n - 3] + "..."


def compare(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """The differences of a rerun from its recording, data and report (not the machine)."""
    return differences(expected["data"], actual["data"], "data") + differences(
        expected["report"], actual["report"], "report"
    )


# ----------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--update", action="store_true", help="write the recordings")
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose among {', '.join(CASES)}")
    status = 0
    for name in args.cases or list(CASES):
        record = run_case(name)
        took = f"{record['_seconds']:.1f} s"
        if args.update:
            print(f"{name}: written {write(record).relative_to(ROOT)} ({took})")
            continue
        if not golden_path(name).is_file():
            print(f"{name}: no recording ({took}): run with --update")
            status = 1
            continue
        expected = load(name)
        if expected["machine"] != record["machine"]:
            print(f"{name}: recorded on another machine ({expected['machine']}; this one "
                  f"{record['machine']}): not compared ({took})")  # fmt: skip
            continue
        diffs = compare(expected, record)
        print(f"{name}: {'same' if not diffs else f'{len(diffs)}+ difference(s)'} ({took})")
        for line in diffs:
            print(f"  {line}")
        status |= bool(diffs)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
