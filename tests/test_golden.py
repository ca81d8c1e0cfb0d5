"""Golden outputs: seeded releases give the recorded outputs (tools/golden.py, tests/golden/).

Recorded before the architecture redesign: single columns of several mechanisms (censor-uw,
censor-w with a public reference, PH, SBS, weighted-e, m = 2 sets, a beta regression), a
pieces model, a whole table (public, model and PH level columns), a plan and a combine (the
CLI end to end). The same seeds must give the same synthetic data (floats to a relative 1e-9,
as recorded at 12 significant digits, or the same hash of the CSV for the larger frames) and
the same public report, less its volatile fields (package versions, program and file hashes,
timings: ``golden.clean_report``).

Numbers from Stan differ across processors and builds, so a case is compared only on a machine
with the recording's fingerprint (processor, its model, numpy, httpstan, Stan backend); on any
other it is skipped, visibly. After an intended change of outputs, or on a new machine, rerun
``.venv/bin/python tools/golden.py --update`` and review the diff of tests/golden/.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("golden", ROOT / "tools" / "golden.py")
golden = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("golden", golden)
_spec.loader.exec_module(golden)


@pytest.fixture(scope="module")
def this_machine() -> dict:
    return golden.machine()


def test_every_case_is_recorded():
    recorded = sorted(p.stem for p in golden.GOLDEN_DIR.glob("*.json"))
    assert recorded == sorted(golden.CASES), "run tools/golden.py --update"


@pytest.mark.slow
@pytest.mark.parametrize("case", list(golden.CASES))
def test_seeded_outputs_match_the_recording(case, this_machine):
    path = golden.golden_path(case)
    if not path.is_file():
        pytest.fail(f"no recording {path.relative_to(ROOT)}: run tools/golden.py --update")
    expected = golden.load(case)
    if expected["machine"] != this_machine:
        pytest.skip(
            f"recorded on another machine: rerun tools/golden.py --update there "
            f"(recorded {expected['machine']}, this one {this_machine})"
        )
    actual = golden.run_case(case)
    diffs = golden.compare(expected, actual)
    assert not diffs, f"{case}: outputs differ from {path.name}:\n" + "\n".join(diffs)


def test_comparison_sees_a_changed_value_and_a_dropped_key():
    """The comparison itself: a relative change above 1e-9 is seen, below it is not; a
    missing key and a changed string are named."""
    a = {"data": {"values": {"y": [1.0, 2.0]}}, "report": {"epsilon": 3.0, "m": "x"}}
    same = {"data": {"values": {"y": [1.0, 2.0 * (1 + 1e-12)]}}, "report": dict(a["report"])}
    assert golden.compare(a, same) == []
    moved = {"data": {"values": {"y": [1.0, 2.0 * (1 + 1e-8)]}}, "report": {"m": "z"}}
    diffs = golden.compare(a, moved)
    assert any(d.startswith("data.values.y[1]") for d in diffs)
    assert any(d.startswith("report.epsilon: missing") for d in diffs)
    assert any(d.startswith("report.m") for d in diffs)


def test_volatile_report_fields_are_dropped():
    report = {
        "epsilon": 1.0,
        "versions": {"numpy": "9"},
        "dpsynth_version": "0",
        "python": "3",
        "model_program_sha256": "ab",
        "nested": [{"seconds": 2.0, "file": f"{golden.ROOT}/x.csv", "keep": 1}],
    }
    assert golden.clean_report(report) == {
        "epsilon": 1.0,
        "nested": [{"file": "<repo>/x.csv", "keep": 1}],
    }
