"""Guards on the shape of ``dpsynth/``: short functions, bounded complexity (issue 28).

Every function is at most ``MAX_LINES`` lines (its ``def`` to its last line, docstring
included) and at most ``MAX_COMPLEXITY`` in ruff's McCabe rule (C901; also on in
``pyproject.toml``, so ``make lint`` enforces it). Declarative tables are module-level
assignments, not functions, so they are the one exception by construction; there are no
per-function exemptions. The CLI keeps a stricter limit of its own
(``tests/test_cli_tables.py``: 60 lines, complexity 10).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpsynth"
MAX_LINES = 80
MAX_COMPLEXITY = 12


def _function_lengths(root: Path = PACKAGE) -> dict[str, int]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out[f"{path.relative_to(root)}:{node.lineno} {node.name}"] = (
                    node.end_lineno - node.lineno + 1
                )
    return out


def test_no_function_is_longer_than_80_lines() -> None:
    lengths = _function_lengths()
    assert len(lengths) > 500  # the walk found the package's functions
    long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not long, f"functions over {MAX_LINES} lines: {long}"


def test_the_length_guard_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n")
    assert _function_lengths(tmp_path) == {"long.py:1 f": MAX_LINES + 1}


def _ruff() -> list[str] | None:
    try:
        import ruff  # noqa: F401
    except ImportError:
        exe = shutil.which("ruff")
        return [exe] if exe else None
    return [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize("target", [PACKAGE, None])
def test_functions_stay_under_the_complexity_threshold(target, tmp_path: Path) -> None:
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed")
    if target is None:  # the check itself fails on a function above the threshold
        branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(MAX_COMPLEXITY))
        target = tmp_path / "branchy.py"
        target.write_text(f"def f(x):\n{branches}\n    return -1\n")
    config = f"lint.mccabe.max-complexity={MAX_COMPLEXITY}"
    cmd = [*ruff, "check", "--isolated", "--select", "C901", "--config", config, str(target)]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if target == PACKAGE:
        assert run.returncode == 0, run.stdout
    else:
        assert run.returncode == 1 and "C901" in run.stdout
