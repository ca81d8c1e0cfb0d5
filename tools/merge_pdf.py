"""Merge the book's page PDFs into one file, in reading order, one bookmark per page.

``make book-pdf`` prints every page of the table of contents to ``_build/pdf/NN_<page>.pdf``
with headless chromium, then runs ``merge_pdf.py _build/pdf/dpsynth_book.pdf <pages...>``:
the whole book as one printable file, each page's first sheet bookmarked by its title (the
page's file name without the ``NN_`` prefix).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pypdf import PdfReader, PdfWriter


def bookmark_title(path: Path) -> str:
    """``03_dp_primer.pdf`` -> ``dp primer``."""
    return re.sub(r"^\d+_", "", path.stem).replace("_", " ")


def merge(out: Path, pages: list[Path]) -> int:
    """Write ``pages`` into ``out`` in the order given; return the number of sheets."""
    writer = PdfWriter()
    for path in pages:
        start = len(writer.pages)
        for sheet in PdfReader(path).pages:
            writer.add_page(sheet)
        if len(writer.pages) > start:
            writer.add_outline_item(title=bookmark_title(path), page_number=start)
    with out.open("wb") as fh:
        writer.write(fh)
    return len(writer.pages)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("pages", type=Path, nargs="+")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.pages if not p.is_file()]
    if missing:
        print(f"merge_pdf: no such page PDF: {', '.join(missing)}", file=sys.stderr)
        return 2
    sheets = merge(args.out, args.pages)
    print(f"[make] {args.out}: {len(args.pages)} pages, {sheets} sheets", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
