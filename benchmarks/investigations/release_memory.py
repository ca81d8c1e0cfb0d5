"""Where a large table release's own memory goes: the peak resident set of the release's
process by phase (reading the file, fitting and drawing the columns, the curator's verdict,
writing the synthetic table as CSV and the report, as the CLI does),
for the dpsynth tree given, so that a commit before a change and one after it run the same
measurement on the same input.

Input: the 10^6 x 12 flights table of ``benchmarks/bench_scale.py`` (resampled, a Parquet
directory of 10 partitions), released at epsilon 6, m = 1, with SHORT fits (2 chains x
(``--iter`` + ``--iter``)) so that the rest of the release shows; the samplers' own processes
are not counted (the scale benchmark measures the whole tree). The release's process is
polled every 0.1 s: its resident set and the innermost dpsynth function on its main
thread's stack: reading while a reader of the file is on it, the verdict while
``dpsynth.curator.table_verdict`` is, else fitting and drawing (encoding included). A tree whose ``synthesize_table`` cannot take
a path (before 2026-11-29) is given the frame read whole first, inside the measurement.

    PYTHONPATH=/path/to/dpsynth-tree .venv/bin/python \
        benchmarks/investigations/release_memory.py --label after

Appends one row per run to ``benchmarks/results/investigations/release_memory.csv``.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(1, str(HERE.parent))  # bench_scale: the input and its spec
RESULTS = HERE.parent / "results" / "investigations" / "release_memory.csv"
READERS = ("read_table", "read_partitions", "read_spec_columns", "spec_partitions", "gathered")
"""dpsynth's readers of a table file (and, since the release reads its file once for what the
fits read, ``dpsynth.table.gather.gathered``): on the stack, the phase is reading."""
WRITERS = ("write_table", "write_parts", "atomic_write_all")
"""dpsynth's writers of the release's files (the CLI writes them after the release): on the
stack, the phase is writing (measured since 2026-11-30; a row of an earlier run has none)."""
FIELDS = ["label", "commit", "rows", "columns", "iter", "phase", "peak_mb", "where", "date"]


class Poll:
    """The process's resident set and the phase of its main thread, every 0.1 s."""

    def __init__(self) -> None:
        import psutil

        self.proc, self.main = psutil.Process(), threading.get_ident()
        self.peaks: dict[str, tuple[int, str]] = {}
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stop.is_set():
            rss = self.proc.memory_info().rss
            phase, where = self._phase()
            if rss > self.peaks.get(phase, (0, ""))[0]:
                self.peaks[phase] = (rss, where)
            time.sleep(0.1)

    def _phase(self) -> tuple[str, str]:
        frame = sys._current_frames().get(self.main)
        ours = [f for f in traceback.extract_stack(frame) if "/dpsynth/" in f.filename]
        if not ours:
            return "outside dpsynth", ""
        phase = "fitting and drawing"  # encoding the columns included
        if any(f.name in WRITERS for f in ours):
            phase = "writing"
        elif any(f.name in READERS for f in ours):
            phase = "reading"
        elif any(Path(f.filename).stem == "table_verdict" for f in ours):
            phase = "verdict"
        inner = ours[-1]
        return phase, f"{inner.filename.split('/dpsynth/')[-1]}:{inner.name}"


def measure(path: Path, columns: int, iters: int) -> dict[str, tuple[int, str]]:
    """One release of ``path`` under :class:`Poll`: the peak resident set per phase."""
    import bench_scale

    from dpsynth import formats
    from dpsynth.sampler import Sampler
    from dpsynth.table import pipeline

    poll = Poll()
    takes_path = hasattr(pipeline, "source")  # dpsynth.table.source: reads a path
    data = path if takes_path else formats.read_table(path, "data")
    sampler = Sampler(chains=2, iter_warmup=iters, iter_sampling=iters)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = pipeline.synthesize_table(data, bench_scale.spec_for(columns), 6.0, sampler=sampler)
    out = path.parent / "released"
    out.mkdir()
    rel.write(out / "synthetic.csv", out / "report.json", out / "diagnostics.json")  # the CLI's
    poll.stop.set()
    return poll.peaks


def append_row(path: Path, fields: list[str], row: dict) -> None:
    """``row`` appended to the CSV file ``path`` (its header ``fields`` written first)."""
    new = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerow(row)


def tree_commit() -> str:
    """The commit of the dpsynth tree imported (the one measured)."""
    import dpsynth

    tree = Path(dpsynth.__file__).resolve().parent.parent
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=tree
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help="e.g. before or after")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--columns", type=int, default=12)
    parser.add_argument("--iter", type=int, default=150)
    args = parser.parse_args()
    import bench_scale

    commit = tree_commit()
    with tempfile.TemporaryDirectory(prefix="dpsynth-memory-") as tmp:
        path = bench_scale.make_input(args.rows, args.columns, Path(tmp))
        peaks = measure(path, args.columns, args.iter)
    date = datetime.now(UTC).isoformat(timespec="seconds")
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        for phase, (rss, where) in sorted(peaks.items()):
            row = {"label": args.label, "commit": commit, "rows": args.rows}
            row |= {"columns": args.columns, "iter": args.iter, "phase": phase}
            row |= {"peak_mb": round(rss / 2**20), "where": where, "date": date}
            writer.writerow(row)
            print(row)


if __name__ == "__main__":
    main()
