"""Rerun a notebook with papermill's own arguments, and a failure said in one line.

``python -m dpsynth.studies.rerun notebooks/04_reweighting.ipynb out.ipynb --cwd notebooks
-p n 400`` is ``papermill`` with the same arguments (``--help-notebook`` included), except
that a notebook that stops prints one line (the cell, the error, what to do) instead of
papermill's Python traceback, and exits with 2 for a refused knob
(:class:`~dpsynth.studies.notebook.KnobError`), 1 for any other error in the notebook.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def failure_line(error: BaseException) -> tuple[str, int]:
    """The one line and the exit status for papermill's ``PapermillExecutionError``."""
    ename = getattr(error, "ename", type(error).__name__)
    evalue = str(getattr(error, "evalue", error)).strip().splitlines()
    message = f"{ename}: {evalue[0] if evalue else ''}"
    cell = getattr(error, "exec_count", None)
    where = f"cell In [{cell}]" if cell is not None else "a cell"
    if ename == "KnobError":
        return f"rerun: refused: {message.removeprefix('KnobError: ')}", 2
    return (
        f"rerun: the notebook stopped at {where} with {message}; the partly executed copy "
        "is the output notebook: open it to see the cell",
        1,
    )


@contextlib.contextmanager
def _kernel_stderr_silenced() -> Iterator[None]:
    """The kernel's own stderr (it inherits file descriptor 2) goes to the null device;
    this process's ``sys.stderr`` (papermill's progress bar and log, the failure line) still
    reaches the terminal. A kernel shut down by papermill can log a tornado traceback there,
    which is noise: a cell's error reaches papermill through the kernel protocol."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    old = sys.stderr
    os.dup2(devnull, 2)
    os.close(devnull)
    sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1)
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr.close()
        sys.stderr = old
        os.dup2(saved, 2)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    """Run papermill's command line on ``argv``; return its exit status."""
    with _kernel_stderr_silenced():
        return _run(argv)


def _run(argv: list[str] | None) -> int:
    import click
    from papermill.cli import papermill
    from papermill.exceptions import PapermillExecutionError

    try:
        papermill.main(args=argv, prog_name="rerun", standalone_mode=False)
    except PapermillExecutionError as error:
        line, status = failure_line(error)
        print(line, file=sys.stderr)
        return status
    except click.exceptions.Exit as done:  # --help, --help-notebook
        return int(done.exit_code or 0)
    except click.ClickException as usage:
        usage.show()
        return int(usage.exit_code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
