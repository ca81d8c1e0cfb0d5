"""Run ``dpsynth`` and kill it with SIGKILL at a chosen point (tests/test_faults.py, issue 53).

Usage: ``python tests/fault_driver.py MODE ARG -- DPSYNTH_ARGS...`` with MODE:

- ``count PATH``: run to the end and write to PATH how many calls of dpsynth's own
  functions the run made (the range of ``calls``);
- ``calls K``: SIGKILL on entering the K-th call of a dpsynth function (a random point);
- ``stderr TEXT``: SIGKILL when TEXT is written to stderr (a progress line: "column 2/");
- ``enter MODULE:NAME`` / ``leave MODULE:NAME``: SIGKILL on entering, or right after the
  return of, the function NAME of MODULE (``leave dpsynth.privacy.budget:charge`` is the
  moment between the budget charge and the release).

The process kills itself (``os.kill(os.getpid(), SIGKILL)``): nothing of Python's clean-up
runs, as when the machine's operator or the kernel's OOM killer ends it.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

PACKAGE = str(Path(__file__).resolve().parents[1] / "dpsynth")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _count_calls(limit: int | None) -> list[int]:
    """Profile dpsynth's function calls; SIGKILL on the ``limit``-th. Returns the counter."""
    seen = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            seen[0] += 1
            if limit is not None and seen[0] >= limit:
                _die()

    sys.setprofile(profile)
    return seen


class _KillOnText:
    """stderr that kills the process when ``text`` is written to it."""

    def __init__(self, stream: Any, text: str) -> None:
        self.stream, self.text = stream, text

    def write(self, data: str) -> int:
        if self.text in data:
            self.stream.flush()
            _die()
        return self.stream.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _wrap(target: str, when: str) -> None:
    """Replace MODULE:NAME by a wrapper that kills on entering or after returning."""
    module_name, name = target.split(":")
    module = importlib.import_module(module_name)
    original = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if when == "enter":
            _die()
        result = original(*args, **kwargs)
        _die()
        return result

    setattr(module, name, wrapper)


def main(argv: list[str]) -> int:
    mode, arg = argv[0], argv[1]
    assert argv[2] == "--", "usage: fault_driver.py MODE ARG -- DPSYNTH_ARGS..."
    from dpsynth.cli.commands import main as dpsynth_main

    seen = None
    if mode == "count":
        seen = _count_calls(None)
    elif mode == "calls":
        _count_calls(int(arg))
    elif mode == "stderr":
        sys.stderr = _KillOnText(sys.stderr, arg)
    elif mode in ("enter", "leave"):
        _wrap(arg, mode)
    else:
        raise SystemExit(f"unknown mode {mode}")
    try:
        code = dpsynth_main(argv[3:])
    finally:
        sys.setprofile(None)
    if seen is not None:
        Path(arg).write_text(str(seen[0]))
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
