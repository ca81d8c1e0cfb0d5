"""One line on what failed in a notebook of the book build, and what to do.

``make`` calls this when papermill fails: it reads the partly executed notebook that
papermill leaves behind, finds the cell that raised, and prints a single line with the
notebook, the cell's first line, the error's last line, and the next step.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat


def explain(part: Path, name: str, profile: str) -> str:
    """The one-line explanation of a failed papermill run of notebook ``name``."""
    rerun = f"then run `make book PROFILE={profile}` again (finished notebooks are kept)"
    try:
        nb = nbformat.read(part, as_version=4)
    except (OSError, ValueError):
        return (
            f"[make] FAILED: notebook {name} did not run (no partial output at {part}): "
            f"check the kernel (make venv), {rerun}"
        )
    for i, cell in enumerate(nb.cells, start=1):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
                error = f"{out.get('ename')}: {out.get('evalue')}".splitlines()[0][:200]
                return (
                    f"[make] FAILED: notebook {name}, cell {i} (`{first.strip()[:60]}`) "
                    f"raised {error}; the partial output is in {part}: fix the cause "
                    f"(or rerun that notebook with other knobs, see the rerun page), {rerun}"
                )
    return (
        f"[make] FAILED: notebook {name} stopped without a cell error (the kernel died or timed out, or "
        f"tools/prepare_executed.py failed: see the lines above;"
        f" the partial output is in {part}): free memory or cores, {rerun}"
    )


if __name__ == "__main__":
    print(explain(Path(sys.argv[1]), sys.argv[2], sys.argv[3]), file=sys.stderr)
