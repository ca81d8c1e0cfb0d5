"""Run the fuzz and fault tests and count what they tried (issue 53; book page "Faults and fuzzing").

Runs ``tests/test_fuzz.py`` and ``tests/test_faults.py`` with pytest under a Hypothesis
profile (``ci`` by default, ``--profile long`` for the longer run), each example and each
fault appending one line to a tally (``DPSYNTH_FUZZ_TALLY``, :func:`tests.fuzz_common.tally`),
and writes ``benchmarks/results/fuzz_faults.csv``: one row per property or fault and outcome,
with the number of examples or faults, the profile, pytest's exit status and counts of
passed and failed tests, the wall time, the date and the machine. The book page reads that
file, and the script rewrites the figures of the README's "Reliability" section from it
(between its two markers; ``--readme-only`` does that alone, from the committed CSV).

    .venv/bin/python benchmarks/fuzz_faults.py                  # the ci profile (minutes)
    .venv/bin/python benchmarks/fuzz_faults.py --profile long   # 25 times the examples
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "fuzz_faults.csv"
TEST_FILES = {"fuzz": "tests/test_fuzz.py", "fault": "tests/test_faults.py"}
FAULTS = ("SIGKILL", "disk full", "concurrent", "damaged ledger", "unwritable", "read-only")
"""Tally names that are faults injected (the others are generated inputs)."""


def run(profile: str) -> pd.DataFrame:
    """Run both test files under ``profile``; one row per (property, outcome)."""
    with tempfile.TemporaryDirectory() as tmp:
        tally = Path(tmp) / "tally.jsonl"
        env = {**os.environ, "HYPOTHESIS_PROFILE": profile, "DPSYNTH_FUZZ_TALLY": str(tally)}
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TEST_FILES.values()],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - start
        print(done.stdout[-2000:], file=sys.stderr)
        rows = pd.read_json(tally, lines=True) if tally.exists() else pd.DataFrame()
    if rows.empty:
        raise SystemExit("the tests tallied nothing: see pytest's output above")
    counts = rows.groupby(["property", "outcome"], as_index=False).size()
    counts = counts.rename(columns={"size": "count"})
    counts.insert(0, "kind", counts.property.map(_kind))
    summary = re.findall(r"(\d+) (passed|failed|skipped|error)", done.stdout.splitlines()[-1])
    found = {word: int(n) for n, word in summary}
    return counts.assign(
        profile=profile,
        pytest_exit=done.returncode,
        tests_passed=found.get("passed", 0),
        tests_failed=found.get("failed", 0) + found.get("error", 0),
        tests_skipped=found.get("skipped", 0),
        seconds=round(seconds, 1),
        date=datetime.now(UTC).strftime("%Y-%m-%d"),
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
    )


def _kind(prop: str) -> str:
    return "fault" if any(prop.startswith(f) or f in prop for f in FAULTS) else "generated input"


README = ROOT / "README.md"
BEGIN = "<!-- fuzz-faults: begin (written by benchmarks/fuzz_faults.py from its CSV) -->"
END = "<!-- fuzz-faults: end -->"


def readme_figures(table: pd.DataFrame) -> str:
    """The README's figures: the run, then per property or fault its count by outcome."""
    run = table.iloc[0]
    kinds = table.groupby("kind")["count"].sum()
    lines = [
        f"Last count ({run.date}, profile `{run.profile}`, {run.machine}, "
        f"{run.seconds / 60:.1f} min): {kinds.get('generated input', 0)} generated inputs and "
        f"{kinds.get('fault', 0)} injected faults; {run.tests_passed} tests passed, "
        f"{run.tests_failed} failed.",
        "",
    ]
    for kind in ("generated input", "fault"):
        for prop, rows in table[table.kind == kind].groupby("property", sort=False):
            coarse = rows.groupby(rows.outcome.map(_coarse), sort=False)["count"].sum()
            parts = "; ".join(f"{outcome}: {n}" for outcome, n in coarse.items())
            lines.append(f"- {prop} ({kind}, {rows['count'].sum()}): {parts}")
    return "\n".join(lines)


def _coarse(outcome: str) -> str:
    """An outcome without the parameter a refusal names (the CSV and the book keep it)."""
    return re.split(r" naming |: (?!\d)", outcome)[0]


def update_readme(table: pd.DataFrame, path: Path = README) -> bool:
    """Replace the text between the README's markers by :func:`readme_figures`; False when
    the README has no markers."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return False
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{readme_figures(table)}\n{END}{tail}", encoding="utf-8")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("ci", "long"), default="ci")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--readme-only", action="store_true", help="rewrite the README's figures from --out"
    )
    args = parser.parse_args()
    if args.readme_only:
        table = pd.read_csv(args.out)
    else:
        table = run(args.profile)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
        print(table[["kind", "property", "outcome", "count"]].to_string(index=False))
        print(f"wrote {args.out}", file=sys.stderr)
    if update_readme(table):
        print(f"updated the figures in {README}", file=sys.stderr)
    return int(table.pytest_exit.iloc[0])


if __name__ == "__main__":
    raise SystemExit(main())
