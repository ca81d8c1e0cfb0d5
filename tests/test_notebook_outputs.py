"""nbval without a second execution: checked outputs of the ci book build against git.

`make book-html PROFILE=ci` executes every ``notebooks/NN_*.ipynb`` with papermill into
``book/executed/NN_*.ipynb`` (and leaves the stamp ``book/executed/.profile-ci``). This module
compares, for each cell marked ``# NBVAL_CHECK_OUTPUT``, the text outputs of that execution
with the outputs committed in ``notebooks/``: stdout streams and ``text/plain`` results, after
nbval-like sanitizing (memory addresses, timings, temporary paths, trailing whitespace).
stderr is not compared (library warnings vary between environments); an error output fails.

Without a ci build it skips, saying why; ``NBVAL_REQUIRE_EXECUTED=1`` (set by ``make nbval``)
turns those skips into failures. ``make test`` runs it right after the ci book build.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
EXECUTED_DIR = ROOT / "book" / "executed"
STAMP = EXECUTED_DIR / ".profile-ci"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
MARKER = "# NBVAL_CHECK_OUTPUT"
CHECK_TAG = "nbval-check-output"

SANITIZERS = [
    (re.compile(r"0x[0-9a-fA-F]{4,}"), "0xADDRESS"),
    (
        re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|sec|secs|seconds|minutes)\b"),
        "TIME",
    ),
    (re.compile(r"\b\d+(?:\.\d+)?s\b"), "TIME"),
    (re.compile(r"\b((?:took|in|after|elapsed|time:?)\s+)\d+(?:\.\d+)?\s?s\b"), r"\1TIME"),
    (re.compile(re.escape(tempfile.gettempdir()) + r"/[^\s'\"]+"), "TMPPATH"),
]


def sanitize(text: str) -> str:
    """nbval-like normalisation of one output text."""
    for pattern, replacement in SANITIZERS:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def text_outputs(cell) -> list[tuple[str, str]]:
    """(kind, sanitized text) of a cell's stdout streams (merged) and text/plain results."""
    out: list[tuple[str, str]] = []
    for o in cell.get("outputs", []):
        kind = o.get("output_type")
        if kind == "error":
            out.append(("error", f"{o.get('ename')}: {o.get('evalue')}"))
        elif kind == "stream" and o.get("name") == "stdout":
            if out and out[-1][0] == "stdout":
                out[-1] = ("stdout", out[-1][1] + _text(o.get("text", "")))
            else:
                out.append(("stdout", _text(o.get("text", ""))))
        elif kind in ("execute_result", "display_data") and "text/plain" in o.get("data", {}):
            out.append(("text/plain", _text(o["data"]["text/plain"])))
    return [(kind, sanitize(text)) for kind, text in out]


def _code(cell) -> str:
    """A checked cell's code without the marker line (the book build moves it to a tag)."""
    return "\n".join(line for line in cell.source.splitlines() if line.strip() != MARKER)


def checked_cells(nb) -> list:
    """Cells marked for checking: the marker in the source (committed notebooks) or the tag
    ``tools/prepare_executed.py`` moves it into (executed notebooks)."""
    return [
        c
        for c in nb.cells
        if c.cell_type == "code"
        and (MARKER in c.source or CHECK_TAG in c.get("metadata", {}).get("tags", []))
    ]


def _skip(reason: str) -> None:
    if os.environ.get("NBVAL_REQUIRE_EXECUTED"):
        pytest.fail(reason)
    pytest.skip(reason)


def test_sanitize() -> None:
    assert sanitize("<obj at 0x7f3a2b4c5d60> took 1.25 s  \n") == "<obj at 0xADDRESS> took TIME"
    assert sanitize("n = 100, p = 0.1\nmax 3.5") == "n = 100, p = 0.1\nmax 3.5"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_checked_outputs_match(path: Path) -> None:
    executed = EXECUTED_DIR / path.name
    if not STAMP.exists():
        _skip(f"no ci book build ({STAMP.relative_to(ROOT)} missing): make book-html PROFILE=ci")
    if not executed.exists():
        _skip(f"{executed.relative_to(ROOT)} missing: make book-html PROFILE=ci")
    if executed.stat().st_mtime < path.stat().st_mtime:
        _skip(f"{executed.relative_to(ROOT)} is older than {path.name}: make book-html PROFILE=ci")
    ran = nbformat.read(executed, as_version=4)
    params = ran.metadata.get("papermill", {}).get("parameters", {})
    if params.get("profile") != "ci":
        _skip(f"{executed.name} ran with profile {params.get('profile')!r}, not 'ci'")

    committed = checked_cells(nbformat.read(path, as_version=4))
    fresh = checked_cells(ran)
    assert committed, f"{path.name} has no {MARKER} cell"
    assert [_code(c) for c in fresh] == [_code(c) for c in committed], (
        f"the checked cells of {executed.name} differ from {path.name}: rebuild the ci book"
    )
    failures = []
    for i, (want_cell, got_cell) in enumerate(zip(committed, fresh, strict=True), start=1):
        want, got = text_outputs(want_cell), text_outputs(got_cell)
        if want != got:
            diff = difflib.unified_diff(
                [f"[{k}] {line}" for k, t in want for line in t.splitlines()],
                [f"[{k}] {line}" for k, t in got for line in t.splitlines()],
                f"notebooks/{path.name} (committed)",
                f"book/executed/{path.name} (ci build)",
                lineterm="",
            )
            first = got_cell.source.splitlines()[1:2]
            failures.append(f"checked cell {i} ({first[0] if first else ''}):\n" + "\n".join(diff))
    assert not failures, "\n\n".join(failures)
