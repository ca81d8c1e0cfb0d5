#!/usr/bin/env python3
"""Prepare a papermill-executed notebook for the book: hide plumbing, add a footer.

Usage (the Makefile runs it on every executed notebook before the book build):

    python tools/prepare_executed.py book/executed/NN_name.ipynb.part --profile ci

In place, it:

1. removes from the page the ``parameters`` cell and papermill's ``injected-parameters``
   cell (tag ``remove-cell``: the page states the profile in its footer instead);
2. hides the input of setup and glue cells (tag ``remove-input``): cells whose code only
   imports, calls ``setup()`` or glues numbers;
3. takes the ``# NBVAL_CHECK_OUTPUT`` marker out of the rendered source and records it as the
   cell tag ``nbval-check-output`` (which ``tests/test_notebook_outputs.py`` reads);
4. appends a footer: when and with which profile the notebook ran, and the versions of
   Python, dpsynth and the engines.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.metadata
import platform
import sys
from pathlib import Path

import nbformat

MARKER = "# NBVAL_CHECK_OUTPUT"
CHECK_TAG = "nbval-check-output"
PLUMBING_CALLS = {"setup", "glue_numbers", "glue", "filterwarnings"}


def _tags(cell) -> list[str]:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def _add_tag(cell, tag: str) -> None:
    tags = _tags(cell)
    if tag not in tags:
        tags.append(tag)


def is_plumbing(source: str) -> bool:
    """True for cells that only import, call ``setup()`` or glue numbers (nothing to read)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False

    def plumbing(stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            return True
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            return name in PLUMBING_CALLS
        return False

    return bool(body) and all(plumbing(stmt) for stmt in body)


def glues(source: str) -> bool:
    """True when the cell glues numbers into the page's text."""
    return "glue_numbers(" in source or "glue(" in source


def shows_output(cell) -> bool:
    """True when the cell prints or displays something besides glued values."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            return True
        data = out.get("data", {})
        scrap = out.get("metadata", {}).get("scrapbook")
        if out.get("output_type") in ("display_data", "execute_result") and data and not scrap:
            return True
    return False


def footer(profile: str) -> str:
    """Markdown footer: run date, profile and versions."""
    import dpsynth

    versions = [f"dpsynth {dpsynth.__version__}"]
    for package in ("numpy", "scipy", "pandas", "pystan", "httpstan", "opendp"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"```{{admonition}} This page was executed\n:class: note\n"
        f"on {when} with the `{profile}` profile, Python {platform.python_version()} on "
        f"{platform.system()} {platform.machine()}; {', '.join(versions)}. "
        f"Rerun it with another profile: see {{doc}}`/book/rerun`.\n```"
    )


def prepare(nb, profile: str):
    """Apply steps 1-4 to a notebook object; return it."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = _tags(cell)
        if "parameters" in tags or "injected-parameters" in tags:
            _add_tag(cell, "remove-cell")
            continue
        if MARKER in cell.source:
            cell.source = "\n".join(
                line for line in cell.source.splitlines() if line.strip() != MARKER
            )
            _add_tag(cell, CHECK_TAG)
        if is_plumbing(cell.source) or (glues(cell.source) and not shows_output(cell)):
            _add_tag(cell, "remove-input")
    nb.cells.append(nbformat.v4.new_markdown_cell(footer(profile)))
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--profile", required=True)
    args = parser.parse_args(argv)
    nb = nbformat.read(args.notebook, as_version=4)
    nbformat.write(prepare(nb, args.profile), args.notebook)
    return 0


if __name__ == "__main__":
    sys.exit(main())
