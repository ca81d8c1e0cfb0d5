#!/usr/bin/env python3
"""Prepare a papermill-executed notebook for the book: hide plumbing, add a footer.

Usage (the Makefile runs it on every executed notebook before the book build):

    python tools/prepare_executed.py book/executed/NN_name.ipynb.part --profile ci

In place, it:

1. removes from the page the ``parameters`` cell and papermill's ``injected-parameters``
   cell (tag ``remove-cell``: the page states the profile in its footer instead);
2. hides the input of plumbing (tag ``remove-input``): cells whose code only imports,
   defines helper functions, calls ``setup()``, ``show_settings()`` or glue, or reads a
   profile's settings (``cfg = settings(...)``), and glue cells that show nothing; and puts
   the rest of the code on a toggle (tag ``hide-input``), except in the chapters of
   ``CODE_IS_THE_LESSON`` whose code is what the reader learns;
3. keeps only what a reader needs in the outputs: stderr streams (library warnings,
   progress bars) are left out of the page, with one line on the terminal saying how many,
   local paths (this checkout, the home and temporary directories) are replaced by
   neutral text, and the echoed return value of a closing ``check_convergence(...)`` is
   dropped (its printed line stays);
4. takes the ``# NBVAL_CHECK_OUTPUT`` marker out of the rendered source and records it as the
   cell tag ``nbval-check-output`` (which ``tests/test_notebook_outputs.py`` reads);
5. appends a footer: when and with which profile the notebook ran, and the versions of
   Python, dpsynth and the engines.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.metadata
import os
import platform
import re
import sys
import tempfile
from pathlib import Path

import nbformat

MARKER = "# NBVAL_CHECK_OUTPUT"
CHECK_TAG = "nbval-check-output"
PLUMBING_CALLS = {
    "setup",
    "glue_numbers",
    "glue",
    "filterwarnings",
    "show_settings",
    "check_knobs",
}
SETTINGS_CALLS = {"settings"}
# Calls whose return value is plumbing when a cell ends with them: check_convergence prints
# its check (or shows a warning box) and returns whether it passed; the page need not echo it.
SILENT_RESULTS = {"check_convergence"}
REPO = Path(__file__).resolve().parents[1]
# Chapters whose code is what the reader learns (the command lines and calls of a release):
# their code stays on the page. Every other chapter shows its code on a toggle.
CODE_IS_THE_LESSON = {"08_synthesize_your_own"}


def _tags(cell) -> list[str]:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def _add_tag(cell, tag: str) -> None:
    tags = _tags(cell)
    if tag not in tags:
        tags.append(tag)


def is_plumbing(source: str) -> bool:
    """True for cells that only import, define helpers, call ``setup()`` /
    ``show_settings()`` / ``check_knobs()`` / glue, or read settings (nothing to read in
    their code)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False

    def called(node: ast.AST, names: set[str]) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in names

    def plumbing(stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.FunctionDef):
            return True
        if isinstance(stmt, ast.Expr):
            return called(stmt.value, PLUMBING_CALLS)
        if isinstance(stmt, ast.Assign):
            return called(stmt.value, SETTINGS_CALLS)
        return False

    return bool(body) and all(plumbing(stmt) for stmt in body)


def ends_with_silent_call(source: str) -> bool:
    """True when the cell's last statement is a bare call in :data:`SILENT_RESULTS`."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    if not body or not isinstance(body[-1], ast.Expr) or not isinstance(body[-1].value, ast.Call):
        return False
    func = body[-1].value.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in (
        SILENT_RESULTS
    )


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


def local_paths() -> list[tuple[re.Pattern, str]]:
    """(pattern, replacement) for the local paths an output may print, longest first."""
    pairs = [
        (str(REPO / "notebooks") + os.sep, ""),
        (str(REPO) + os.sep, ""),
        (str(REPO), "."),
        (tempfile.gettempdir().rstrip(os.sep) + os.sep, "<tmp>/"),
        (str(Path.home()) + os.sep, "~/"),
    ]
    return [(re.compile(re.escape(path)), new) for path, new in pairs if len(path) > 2]


def scrub(text: str, patterns: list[tuple[re.Pattern, str]] | None = None) -> str:
    """``text`` with local paths replaced (see :func:`local_paths`)."""
    for pattern, new in patterns or local_paths():
        text = pattern.sub(new, text)
    return text


def clean_outputs(cell, patterns) -> list[str]:
    """Drop stderr streams from a cell's outputs and scrub local paths from the rest.

    Returns the first line of each stderr stream dropped (for the terminal)."""
    dropped, kept = [], []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            text = "".join(out.get("text", ""))
            first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
            dropped.append(scrub(first, patterns)[:100])
            continue
        if out.get("output_type") == "stream":
            out["text"] = scrub("".join(out.get("text", "")), patterns)
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/") or mime == "application/json":
                if isinstance(value, str):
                    out["data"][mime] = scrub(value, patterns)
                elif isinstance(value, list):
                    out["data"][mime] = [scrub(v, patterns) for v in value]
        kept.append(out)
    cell["outputs"] = kept
    return dropped


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


def prepare(nb, profile: str, report: list[str] | None = None, show_code: bool = False):
    """Apply steps 1-5 to a notebook object; return it. ``report`` collects the first line
    of every stderr output left out of the page. Unless ``show_code`` (a chapter whose code
    is the lesson, :data:`CODE_IS_THE_LESSON`), every code cell that is not plumbing gets
    the tag ``hide-input``: the page shows figures and tables, its code on a toggle."""
    patterns = local_paths()
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
        if ends_with_silent_call(cell.source):
            cell.outputs = [o for o in cell.outputs if o.get("output_type") != "execute_result"]
        dropped = clean_outputs(cell, patterns)
        if report is not None:
            report += dropped
        if is_plumbing(cell.source) or (glues(cell.source) and not shows_output(cell)):
            _add_tag(cell, "remove-input")
        elif not show_code:
            _add_tag(cell, "hide-input")
    nb.cells.append(nbformat.v4.new_markdown_cell(footer(profile)))
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--profile", required=True)
    args = parser.parse_args(argv)
    nb = nbformat.read(args.notebook, as_version=4)
    dropped: list[str] = []
    stem = args.notebook.name.split(".")[0]
    show_code = stem in CODE_IS_THE_LESSON
    nbformat.write(prepare(nb, args.profile, dropped, show_code), args.notebook)
    if dropped:
        kinds = sorted(set(dropped))
        print(
            f"[prepare] {args.notebook.name}: {len(dropped)} stderr output(s) left out of the "
            f"page: {' | '.join(kinds[:3])}" + (" ..." if len(kinds) > 3 else ""),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
