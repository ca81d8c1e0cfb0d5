"""The browser check's page-content checks (tools/check_book.py), on small hand-made pages.

Each check must fail on a page with the fault and pass on the same page without it; all but
one need no chromium (the probe's measurements are passed in as the dict it would write); that
one runs the probe in headless chromium on served pages.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "tools" / "check_book.py"
_spec = importlib.util.spec_from_file_location("check_book", _PATH)
check_book = importlib.util.module_from_spec(_spec)
sys.modules["check_book"] = check_book
_spec.loader.exec_module(check_book)


def page(body: str) -> str:
    return (
        "<html><head><title>A page</title><script>var x = '/work/x';</script></head><body>"
        f"<main><article class='bd-article'><h1>A page</h1>{body}</article></main></body></html>"
    )


def problems(body: str) -> list[str]:
    return check_book.content_problems("book/x", check_book.parse_html(page(body)))


def output(text: str) -> str:
    return (
        "<div class='cell_output docutils container'><div class='output text_plain "
        f"highlight-myst-ansi notranslate'><div class='highlight'><pre>{text}</pre></div></div></div>"
    )


GOOD = "<p>The model <code>--model lognormal-regression</code> is fitted.</p>"


def test_a_good_page_passes():
    assert problems(GOOD) == []


@pytest.mark.parametrize(
    "bad",
    [
        "<dl><dt>--model</dt><dd>one of &lt;dpsynth.cli.commands._LazyChoices object at 0x7f3a2b1c&gt;</dd></dl>",
        "<pre>choices: &lt;Foo object at 0xdeadbeef&gt;</pre>",
    ],
)
def test_object_reprs_fail(bad):
    found = problems(bad)
    assert len(found) == 1 and "object repr" in found[0]


@pytest.mark.parametrize(
    "bad",
    [
        "<p>STAN_DIR = '/work/main/dpsynth/stan'</p>",
        "<dl><dd><code>/root/.cache/httpstan</code></dd></dl>",
        "<pre>written to /home/ana/out.csv</pre>",
        "<p>see /tmp/dpsynth-abc/report.json</p>",
    ],
)
def test_build_paths_fail(bad):
    found = problems(bad)
    assert len(found) == 1 and "absolute path" in found[0]


def test_relative_and_home_paths_pass():
    assert problems("<p>Files go to <code>~/.cache/httpstan</code> and results/x.csv</p>") == []


def test_a_script_is_not_page_text():
    # the page() wrapper has '/work/x' in a <script>: a reader never sees it
    assert problems("") == []


@pytest.mark.parametrize(
    "bad",
    [
        "<p>This is the case that started this page.</p>",
        "<p>Until the issue's release, use censor-uw.</p>",
        "<p>The goal of the issue was to ...</p>",
        "<p>See issue #30.</p>",
        "<p>The goal of issue 19 was a mean error of at most 10%.</p>",
        "<p>Open a ticket.</p>",
        "<p>An independent reviewer ran the mechanism.</p>",
    ],
)
def test_tracker_wording_fails(bad):
    found = problems(bad)
    assert found and all("tracker wording" in f for f in found)


def test_prose_inside_myst_sections_is_read():
    """MyST marks every top <section> tex2jax_ignore mathjax_ignore (MathJax then renders only
    the math spans): the prose inside must still reach the checks; an inline span with the
    class (dollar amounts in a table) and the math spans themselves stay out of it."""
    wrapped = (
        "<section class='tex2jax_ignore mathjax_ignore' id='s'><h2>Costs</h2>"
        "<p>Measured once (issue 26), as the ticket says.</p></section>"
    )
    found = problems(wrapped)
    assert len(found) >= 2 and all("tracker wording" in f for f in found), found
    fine = (
        "<section class='tex2jax_ignore mathjax_ignore'><p>Each record: "
        "<span class='math notranslate nohighlight'>\\(M = \\varepsilon / 4\\)</span>; "
        "<span class='tex2jax_ignore'>$\\frac 5</span> a week.</p>"
        "<div class='dpsynth-comparison-block tex2jax_ignore'><table><tr>"
        "<td>median ($): Censor_w; mean ($): Censor_uw</td></tr></table></div></section>"
    )
    assert problems(fine) == []


def test_a_reviewer_linked_to_the_glossary_passes():
    body = (
        "<p>An independent <a class='reference internal' href='glossary.html#term-reviewer'>"
        "<span class='xref std std-term'>reviewer</span></a> ran it; the reviewer agreed.</p>"
    )
    assert problems(body) == []


def test_tracker_words_in_code_are_not_prose():
    assert problems("<pre>git log --grep 'the issue'</pre>") == []


def test_nan_in_a_table_cell_fails():
    bad = "<table><tr><th>p</th></tr><tr><td>NaN</td></tr></table>"
    found = problems(bad)
    assert len(found) == 1 and "NaN" in found[0]
    assert problems("<table><tr><th>p</th></tr><tr><td>0.95</td></tr></table>") == []
    assert problems("<table><tr><td>nan</td></tr></table>")
    # words that contain nan are fine
    assert problems("<table><tr><td>nominal, financial</td></tr></table>") == []


WRAPPED = """     mechanism   n     mean  \\
0    censor-uw   100   0.41
1    censor-w    100   0.39

     sd
0    0.12
1    0.13"""
ALIGNED = """mechanism    n      mean    sd
censor-uw    100    0.41    0.12
censor-w     100    0.39    0.13
lw           100    0.40    0.11"""


@pytest.mark.parametrize("text", [WRAPPED, ALIGNED])
def test_a_plain_text_table_in_an_output_fails(text):
    found = problems(output(text))
    assert len(found) == 1 and "plain-text table" in found[0]


@pytest.mark.parametrize(
    "text",
    [
        "fits converged: max R-hat 1.004",
        "epsilon  1.0\nn  1000\n",
        "Wrote results/out.csv\nTook 3 s\nDone",
        "$ dpsynth synthesize in.csv --column y \\\n    --mechanism ph \\\n    --epsilon 1",
    ],
)
def test_plain_output_passes(text):
    assert problems(output(text)) == []


def test_a_table_in_code_that_is_not_an_output_passes():
    # a code block in the prose may align columns on purpose
    assert problems(f"<div class='highlight'><pre>{ALIGNED}</pre></div>") == []


def test_overlapping_tick_labels_fail():
    bad = (
        "<div class='cell_output'><div class='output text_html'><div class='dpsynth-check'>"
        "Tick labels overlap in the figure above: x axis of panel 'n = 100': '0.2' and '0.4'"
        "</div></div></div>"
    )
    found = problems(bad)
    assert len(found) == 1 and "tick labels overlap" in found[0]


def test_cut_off_code_and_tables_fail_at_1280_px():
    cut = [{"kind": "code", "content": 900, "box": 690, "text": "dpsynth synthesize ..."}]
    assert check_book.cutoff_problems("book/x at 1280 px", cut, 1280)
    assert check_book.cutoff_problems("book/x at 500 px", cut, 500) == []
    assert check_book.cutoff_problems("book/x at 1280 px", [], 1280) == []
    probe = {"state": "ok", "innerWidth": 1280, "scrollWidth": 1280, "cutoff": cut}
    info = check_book.parse_html(page(GOOD))
    info.probe = probe
    found, _ = check_book.check_rendering("book/x", info, 1280, first=False)
    assert len(found) == 1 and "cut off at the right" in found[0]
    info.probe = dict(probe, cutoff=[])
    assert check_book.check_rendering("book/x", info, 1280, first=False)[0] == []


def test_the_probe_measures_cut_off_blocks():
    assert "res.cutoff" in check_book.PROBE_JS
    # the probe is a %-template: it must format
    check_book.PROBE_JS % {"limit": 1, "result_id": "r"}


WIDE_LINE = "dpsynth synthesize in.csv --column income " + "--a-long-option value " * 20


@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="chromium is not installed (make browser installs it)",
)
def test_the_probe_finds_cut_off_code_and_tables_in_a_real_browser(tmp_path):
    """The probe itself, run by headless chromium on served pages at 1280 px: a code block
    and a table wider than their scroll boxes are reported, the same page with short lines
    is not."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    cells = "".join(f"<td>column {j} with a long heading</td>" for j in range(40))
    wide = (
        f"<div style='overflow-x: auto'><pre>{WIDE_LINE}</pre></div>"
        f"<div style='overflow-x: auto'><table><tr>{cells}</tr></table></div>"
    )
    narrow = "<div style='overflow-x: auto'><pre>dpsynth synthesize in.csv</pre></div>"
    (tmp_path / "bad.html").write_text(page(wide))
    (tmp_path / "good.html").write_text(page(narrow))
    server, base = check_book.start_server(tmp_path)
    try:
        found = {}
        for name in ("bad", "good"):
            dom = check_book.dump_dom(chromium, f"{base}{name}.html", 120.0, 1280, 5000)
            found[name] = check_book.parse_html(dom).probe["cutoff"]
    finally:
        server.shutdown()
    assert {c["kind"] for c in found["bad"]} == {"code", "table"}, found
    assert all(c["content"] > c["box"] for c in found["bad"])
    assert found["good"] == []
    assert check_book.cutoff_problems("book/bad at 1280 px", found["bad"], 1280)


def test_raw_tex_is_read_inside_myst_sections_but_not_in_marked_tables():
    """A cross-reference to a heading with maths renders its title as raw TeX (the choices
    page had one): found inside a MyST section; dollar amounts in a block marked
    tex2jax_ignore and MathJax's own math spans are not TeX left as text."""

    def places(body: str) -> int:
        return check_book.raw_tex(check_book.parse_html(page(body)))[0]

    section = "<section class='tex2jax_ignore mathjax_ignore'>{}</section>"
    assert places(section.format("<p><a href='#x'>a supremum over \\Theta</a></p>")) == 1
    fine = (
        "<p>over <span class='math notranslate nohighlight'>\\(\\Theta\\)</span></p>"
        "<div class='dpsynth-comparison-block tex2jax_ignore'><table><tr>"
        "<td>median ($): Censor_w; mean ($): Censor_uw</td></tr></table></div>"
    )
    assert places(section.format(fine)) == 0
