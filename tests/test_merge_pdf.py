"""tools/merge_pdf.py: the book's page PDFs merged into one, in order, one bookmark each."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from pypdf import PdfReader, PdfWriter

_PATH = Path(__file__).resolve().parents[1] / "tools" / "merge_pdf.py"
_spec = importlib.util.spec_from_file_location("merge_pdf", _PATH)
merge_pdf = importlib.util.module_from_spec(_spec)
sys.modules["merge_pdf"] = merge_pdf
_spec.loader.exec_module(merge_pdf)


def _pdf(path: Path, sheets: int, width: float) -> Path:
    writer = PdfWriter()
    for _ in range(sheets):
        writer.add_blank_page(width=width, height=800)
    with path.open("wb") as fh:
        writer.write(fh)
    return path


def test_pages_are_merged_in_order_with_one_bookmark_each(tmp_path):
    pages = [
        _pdf(tmp_path / "01_intro.pdf", 2, 500),
        _pdf(tmp_path / "02_dp_primer.pdf", 3, 600),
        _pdf(tmp_path / "03_whole_table.pdf", 1, 700),
    ]
    out = tmp_path / "book.pdf"
    assert merge_pdf.main([str(out), *map(str, pages)]) == 0
    reader = PdfReader(out)
    assert [float(p.mediabox.width) for p in reader.pages] == [500] * 2 + [600] * 3 + [700]
    titles = [(item.title, reader.get_destination_page_number(item)) for item in reader.outline]
    assert titles == [("intro", 0), ("dp primer", 2), ("whole table", 5)]


def test_a_missing_page_is_refused_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "book.pdf"
    assert merge_pdf.main([str(out), str(tmp_path / "01_nope.pdf")]) == 2
    assert "01_nope.pdf" in capsys.readouterr().err and not out.exists()
