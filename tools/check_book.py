#!/usr/bin/env python3
"""Check the built book in a real headless browser.

Usage:
    python tools/check_book.py [BUILD_DIR] [--toc TOC] [--pages DOC ...] [--widths W ...]
                               [--no-screenshot]

BUILD_DIR defaults to _build/html. The site is served from a local http.server
on 127.0.0.1 (a random free port, in a thread) and every page is opened with
Debian's headless chromium, which is denied every other host: what a page needs
must come from the build. The server adds a small script to each page it serves
to the check (and only to those): once the page has loaded, MathJax has finished
and every image has settled, the script writes its measurements into the DOM,
and chromium's --dump-dom (after --virtual-time-budget) hands them back with the
rendered page. The checks:

1. every page listed in the table of contents (_toc.yml, or --toc) loads: the
   DOM has a title, a main article with a heading, and no Sphinx/docutils error
   markup (system-message, problematic) or notebook error output (traceback);
2. every notebook page under book/executed/ shows at least one figure: an
   <img> in the article whose src resolves to an existing, non-empty image file;
3. no internal link anywhere in the built site is broken: every href to a local
   page or file exists, and every #anchor exists as an id in its target page;
4. math is rendered: MathJax is loaded from the build (no page loads anything
   from another host), every formula was typeset (no MathJax_Error/mjx-merror,
   no formula left as TeX), and no raw TeX ($$, \\(, \\[, \\begin{, \\frac, any
   \\command) is visible in the page text outside <script>, <pre> and <code>;
5. no image on the page is broken (failed to load or has no pixels), and no page
   requests a file the build does not have (a script, style sheet, font or image);
6. nothing overflows horizontally: at each --widths (default 1280 and 500 px)
   the page is no wider than the browser window; the widest offenders are named;
   and no text in a notebook output is clipped: no element of an output has content
   wider than its box (a scroll box hiding the end of a line, or hidden overflow) or
   taller than a box that hides it (tables may scroll inside themselves);
7. what the page says (pure functions of the parsed page, tested in
   tests/test_check_book.py): no Python object repr (`<... object at 0x...>`), no
   absolute path of the build machine (/work/, /root/, /home/, /tmp/), no tracker
   wording ("the issue", "issue #", "the case that started", "ticket", or "reviewer"
   not linked to the glossary), no NaN in a table cell, no notebook output printed as
   a plain-text table (show it as HTML), and no note of overlapping tick labels
   (dpsynth.studies.notebook.show writes one under a figure whose tick labels overlap,
   measured with matplotlib's renderer); and at 1280 px no code block or table is cut
   off at the right (wider than its scroll box);
8. a screenshot of the intro page is written to _build/screenshots/intro.png.

It prints one summary line, `book check: N pages, M figures, K internal links,
F formulas: OK`, and exits 0; otherwise it lists the problems and exits 1 (2 if
it cannot run: no build, no chromium). Not a pytest test: `make book-check` runs it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import html.parser
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urljoin, urlsplit

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CHROMIUM = "/usr/bin/chromium"
DEFAULT_WIDTHS = (1280, 500)  # 500: the narrowest window headless chromium opens
WINDOW_HEIGHT = 900
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    # Only the local server resolves: the check never reaches the network.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
ERROR_CLASSES = {"system-message", "problematic", "traceback"}
# MathJax 2 marks TeX it could not typeset with these (mjx-noError: the noErrors extension
# shows the source instead); MathJax 3 with mjx-merror.
MATH_ERROR_CLASSES = {"MathJax_Error", "mjx-merror", "mjx-noError", "noError", "merror"}
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF")
SKIP_SCHEMES = ("mailto:", "javascript:", "data:", "tel:")
QUERY_FLAG = "book-check"
RESULT_ID = "book-check-result"

# Text inside these is not prose: code, scripts (MathJax keeps the TeX source in
# <script type="math/tex">), MathML for screen readers, and the check's own output.
TEXT_SKIP_TAGS = {
    "script",
    "style",
    "noscript",
    "template",
    "pre",
    "code",
    "kbd",
    "samp",
    "textarea",
    "math",
    "svg",
    "title",
}
TEXT_SKIP_CLASSES = {
    "highlight",
    "MJX_Assistive_MathML",
    "MathJax_Preview",
    "MathJax_Hidden",
    "MathJax_Message",
    "mjx-assistive-mml",
    "sig",
    "sig-object",
    "math",  # MathJax's input (\( ... \)), rendered by the reader's browser
}
# Text marked as never maths (e.g. dollar amounts in dpsynth's comparison tables, a
# <div class="... tex2jax_ignore">): skipped, but MyST marks every page's top <section>
# with these classes too, so on a section they must not hide the page's prose.
INLINE_SKIP_CLASSES = {"tex2jax_ignore", "mathjax_ignore"}
CONTAINER_TAGS = {"section", "article", "main", "body"}
# Elements whose text a reader never sees (the check's own result <pre> is added by id).
UNSEEN_TAGS = {"script", "style", "noscript", "template", "title"}
RAW_TEX = re.compile(
    r"\$\$"  # display-math delimiters
    r"|\\[()\[\]]"  # \( \) \[ \]
    r"|\\(?:begin|end)\{"  # environments
    r"|\\[A-Za-z]{2,}"  # any command: \frac, \sum, \mathbf, ...
    r"|\$[^$\s][^$\n]{0,80}?[\\^_{}][^$\n]{0,80}?\$"  # inline $...$ left as text
)

# Injected into each page the check opens (never into the build): waits for the load
# event, MathJax (2 or 3) and the images, then writes what it measured as JSON into
# <pre id="book-check-result">, which --dump-dom returns with the page.
PROBE_JS = r"""
(function () {
  var started = Date.now(), LIMIT = %(limit)d;
  function done(state) {
    var w = window.innerWidth, doc = document.documentElement;
    var res = {state: state, innerWidth: w,
               scrollWidth: Math.max(doc.scrollWidth, document.body ? document.body.scrollWidth : 0),
               mathjax: null, formulas: 0, untypeset: [], brokenImages: [], pendingImages: [],
               external: [], overflow: []};
    var mjScript = document.querySelector('script[src*="MathJax.js"], script[src*="tex-"]');
    if (mjScript) res.mathjax = mjScript.src;
    var jaxScripts = document.querySelectorAll('script[type^="math/tex"]');
    res.formulas = jaxScripts.length + document.querySelectorAll('mjx-container').length;
    for (var i = 0; i < jaxScripts.length; i++) {
      var s = jaxScripts[i];
      if (!s.id || !document.getElementById(s.id + '-Frame')) {
        res.untypeset.push((s.textContent || '').slice(0, 80));
      }
    }
    var imgs = document.images;
    for (var j = 0; j < imgs.length; j++) {
      var im = imgs[j], src = im.getAttribute('src') || '';
      if (!im.complete) res.pendingImages.push(src);
      else if (im.naturalWidth === 0) res.brokenImages.push(src);
    }
    var origin = location.origin + '/';
    var entries = (performance.getEntriesByType && performance.getEntriesByType('resource')) || [];
    entries.forEach(function (e) {
      if (e.name.indexOf(origin) !== 0 && !/^(data|blob|about):/.test(e.name)) res.external.push(e.name);
    });
    document.querySelectorAll('script[src], link[rel~="stylesheet"][href], img[src], iframe[src]')
      .forEach(function (el) {
        var u = el.src || el.href || '';
        if (/^https?:/.test(u) && u.indexOf(origin) !== 0 && res.external.indexOf(u) < 0) res.external.push(u);
      });
    if (res.scrollWidth > w + 1) {
      // The outermost visible elements reaching past the window, not inside a scroller.
      var all = document.body.getElementsByTagName('*'), seen = [];
      for (var k = 0; k < all.length && res.overflow.length < 5; k++) {
        var el = all[k], r = el.getBoundingClientRect();
        if (r.width === 0 || r.right <= w + 1) continue;
        var clipped = false, inside = false;
        for (var p = el.parentElement; p && p !== document.body; p = p.parentElement) {
          if (seen.indexOf(p) >= 0) { inside = true; break; }
          var ox = getComputedStyle(p).overflowX;
          if (ox !== 'visible') { clipped = true; break; }
        }
        var pos = getComputedStyle(el).position;
        if (clipped || inside || pos === 'fixed') continue;
        seen.push(el);
        var name = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
          (el.className && typeof el.className === 'string' ?
            '.' + el.className.trim().split(/\s+/).slice(0, 3).join('.') : '');
        res.overflow.push(name + ' (right edge ' + Math.round(r.right) + ' px)');
      }
    }
    // Clipped output: an element of a notebook output whose content is wider than its box
    // (a scroll box the reader must scroll to see the end of a line, or hidden overflow),
    // or taller than a box that hides it. Tables may scroll inside themselves.
    res.clipped = [];
    var outs = document.querySelectorAll('.cell_output, .cell_output *, .output, .output *');
    for (var q = 0; q < outs.length && res.clipped.length < 5; q++) {
      var o = outs[q];
      if (o.tagName === 'TABLE' || o.tagName === 'IMG' || o.closest('table')) continue;
      if (o.getClientRects().length === 0) continue;
      var cs = getComputedStyle(o);
      var wide = cs.overflowX !== 'visible' && o.scrollWidth > o.clientWidth + 1;
      var tall = (cs.overflowY === 'hidden' || cs.overflowY === 'clip') &&
                 o.scrollHeight > o.clientHeight + 1;
      if (!wide && !tall) continue;
      var snippet = (o.textContent || '').trim().split('\n')[0].slice(0, 60);
      res.clipped.push(o.tagName.toLowerCase() + ' ' + (wide ? 'content ' + o.scrollWidth +
        ' px wide in a ' + o.clientWidth + ' px box' : 'content ' + o.scrollHeight +
        ' px tall in a ' + o.clientHeight + ' px box') + ': "' + snippet + '"');
    }
    // Cut-off code and tables: a code block, or a table's scroll box, anywhere in the
    // article whose content is wider than its box (the reader must scroll to see the end).
    res.cutoff = [];
    var art = document.querySelector('article, .bd-article');
    var blocks = art ? art.querySelectorAll('pre, table') : [];
    for (var b = 0; b < blocks.length && res.cutoff.length < 5; b++) {
      var el = blocks[b], box = null;
      if (el.getClientRects().length === 0) continue;
      for (var up = el; up && up !== art; up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== 'visible' && up.scrollWidth > up.clientWidth + 1) {
          box = up; break;
        }
      }
      if (!box) continue;
      var line = (el.textContent || '').trim().split('\n')[0].replace(/\s+/g, ' ').slice(0, 60);
      res.cutoff.push({kind: el.tagName === 'TABLE' ? 'table' : 'code',
                       content: box.scrollWidth, box: box.clientWidth, text: line});
    }
    var pre = document.createElement('pre');
    pre.id = '%(result_id)s';
    pre.style.display = 'none';
    pre.textContent = JSON.stringify(res);
    document.body.appendChild(pre);
  }
  function imagesSettled() {
    for (var i = 0; i < document.images.length; i++) if (!document.images[i].complete) return false;
    return true;
  }
  function waitImages() {
    if (imagesSettled() || Date.now() - started > LIMIT) return done(imagesSettled() ? 'ok' : 'images-timeout');
    setTimeout(waitImages, 100);
  }
  function waitMath() {
    var mj = window.MathJax, has = document.querySelector('script[src*="MathJax.js"], script[src*="tex-"]');
    if (!has) return waitImages();
    if (mj && mj.Hub && mj.Hub.Queue && mj.isReady) {        // MathJax 2
      return mj.Hub.Queue(function () { setTimeout(waitImages, 0); });
    }
    if (mj && mj.startup && mj.startup.promise) {             // MathJax 3
      return mj.startup.promise.then(waitImages, waitImages);
    }
    if (Date.now() - started > LIMIT) return done('mathjax-timeout');
    setTimeout(waitMath, 100);
  }
  function start() {
    for (var i = 0; i < document.images.length; i++) document.images[i].loading = 'eager';
    waitMath();
  }
  if (document.readyState === 'complete') start();
  else window.addEventListener('load', start);
})();
"""


class SetupError(Exception):
    """The check cannot run at all (exit status 2)."""


# --------------------------------------------------------------------------- toc


def toc_docnames(toc_file: Path) -> list[str]:
    """Docnames (paths without suffix) of the root and every `file:` entry of a _toc.yml."""
    if not toc_file.is_file():
        raise SetupError(f"no table of contents at {toc_file}")
    names: list[str] = []
    for line in toc_file.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0]
        m = re.match(r"^\s*(?:-\s*)?(root|file)\s*:\s*(\S+)\s*$", line)
        if m:
            name = m.group(2).strip("'\"")
            name = re.sub(r"\.(md|ipynb|rst)$", "", name)
            if name not in names:
                names.append(name)
        elif re.match(r"^\s*(?:-\s*)?glob\s*:", line):
            raise SetupError(f"{toc_file}: glob entries are not supported by this check")
    if not names:
        raise SetupError(f"{toc_file}: no root or file entries")
    return names


# ---------------------------------------------------------------------- parsing


@dataclass
class PageInfo:
    """What the check needs from one HTML document."""

    title: str = ""
    has_main: bool = False
    has_article: bool = False
    headings: list[str] = field(default_factory=list)
    article_imgs: list[str] = field(default_factory=list)
    error_classes: set[str] = field(default_factory=set)
    math_errors: int = 0
    ids: set[str] = field(default_factory=set)
    hrefs: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)  # visible prose, outside code and scripts
    all_text: list[str] = field(default_factory=list)  # everything a reader sees, code included
    output_pres: list[str] = field(default_factory=list)  # <pre> text of notebook outputs
    cells: list[str] = field(default_factory=list)  # text of every table cell (td, th)
    term_links: list[str] = field(default_factory=list)  # text of links to glossary terms
    probe: dict | None = None  # the injected script's measurements


class PageParser(html.parser.HTMLParser):
    """Collect title, article, headings, images, ids, links, prose text and error markup."""

    VOID = {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.info = PageInfo()
        # (tag, opens the article, hides its text from the prose check)
        self._stack: list[tuple[str, bool, bool]] = []
        self._in_title = False
        self._in_result = False
        self._result: list[str] = []
        self._heading: list[str] | None = None
        # open captures: (stack depth of the element, kind, text pieces)
        self._captures: list[tuple[int, str, list[str]]] = []

    @property
    def _in_output(self) -> bool:
        return any("output" in flags for _, _, _, flags in self._stack)

    @property
    def _in_article(self) -> bool:
        return any(is_article for _, is_article, _, _ in self._stack)

    @property
    def _text_hidden(self) -> bool:
        return any(hidden for _, _, hidden, _ in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        classes = set(a.get("class", "").split())
        if "id" in a:
            self.info.ids.add(a["id"])
        if tag == "a" and "name" in a:
            self.info.ids.add(a["name"])
        if tag in ("a", "area") and "href" in a:
            self.info.hrefs.append(a["href"])
        if tag == "title":
            self._in_title = True
        if tag == "main":
            self.info.has_main = True
        if tag == "pre" and a.get("id") == RESULT_ID:
            self._in_result = True
        is_article = tag == "article" or "bd-article" in classes
        if is_article:
            self.info.has_article = True
        self.info.error_classes |= classes & ERROR_CLASSES
        if classes & MATH_ERROR_CLASSES:
            self.info.math_errors += 1
        hidden = (
            tag in TEXT_SKIP_TAGS
            or bool(classes & TEXT_SKIP_CLASSES)
            or (tag not in CONTAINER_TAGS and bool(classes & INLINE_SKIP_CLASSES))
            or "display:none" in a.get("style", "").replace(" ", "")
        )
        if self._in_article or is_article:
            if tag == "img":
                self.info.article_imgs.append(a.get("src", ""))
            if tag in ("h1", "h2"):
                self._heading = []
        flags: set[str] = set()
        if classes & {"cell_output", "output"}:
            flags.add("output")
        if tag in UNSEEN_TAGS or a.get("id") == RESULT_ID:
            flags.add("unseen")
        if tag not in self.VOID:
            depth = len(self._stack)
            if tag == "pre" and self._in_output and a.get("id") != RESULT_ID:
                self._captures.append((depth, "pre", []))
            if tag in ("td", "th"):
                self._captures.append((depth, "cell", []))
            if tag == "a" and "#term-" in a.get("href", ""):
                self._captures.append((depth, "term", []))
            self._stack.append((tag, is_article, hidden, frozenset(flags)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID and self._stack and self._stack[-1][0] == tag:
            self._close_from(len(self._stack) - 1)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag == "pre" and self._in_result:
            self._in_result = False
        if tag in ("h1", "h2") and self._heading is not None:
            self.info.headings.append(" ".join("".join(self._heading).split()).rstrip("#"))
            self._heading = None
        for i in range(len(self._stack) - 1, -1, -1):  # tolerate unclosed tags
            if self._stack[i][0] == tag:
                self._close_from(i)
                break

    def _close_from(self, depth: int) -> None:
        """Pop the stack down to `depth`, handing over the text of the captures it closes."""
        del self._stack[depth:]
        while self._captures and self._captures[-1][0] >= depth:
            _, kind, pieces = self._captures.pop()
            text = "".join(pieces)
            if kind == "pre":
                self.info.output_pres.append(text)
            elif kind == "cell":
                self.info.cells.append(" ".join(text.split()))
            else:
                self.info.term_links.append(" ".join(text.split()))

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.info.title += data
        if self._in_result:
            self._result.append(data)
        if self._heading is not None:
            self._heading.append(data)
        in_body = any(t == "body" for t, _, _, _ in self._stack)
        if not in_body or any("unseen" in flags for _, _, _, flags in self._stack):
            return
        self.info.all_text.append(data)
        for _, _, pieces in self._captures:
            pieces.append(data)
        if not self._text_hidden:
            self.info.text.append(data)

    def close(self) -> None:
        super().close()
        if self._result:
            try:
                self.info.probe = json.loads("".join(self._result))
            except ValueError:
                self.info.probe = None


def parse_html(text: str) -> PageInfo:
    parser = PageParser()
    parser.feed(text)
    parser.close()
    parser.info.title = " ".join(parser.info.title.split())
    return parser.info


def raw_tex(info: PageInfo) -> tuple[int, list[str]]:
    """(number of places, first snippets) of visible text that still looks like TeX source."""
    text = " ".join(" ".join(info.text).split())
    count, snippets, last_end = 0, [], -1
    for m in RAW_TEX.finditer(text):
        if m.start() > last_end:  # one count per place, not per command
            count += 1
            if len(snippets) < 2:
                snippets.append(text[max(0, m.start() - 30) : m.end() + 30])
        last_end = m.end() + 30
    return count, snippets


# ------------------------------------------------------------- page content
# Pure functions of a parsed page (PageInfo): each returns the problems it finds, so that
# tests/test_check_book.py can run them on small hand-made pages, without chromium.

OBJECT_REPR = re.compile(r"<[A-Za-z_][\w.]* object at 0x[0-9a-fA-F]+>")
# An absolute path of the build machine (a home, scratch or work folder) in the page text.
BUILD_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|tmp)/[^\s'\"<>),;]*")
# Wording of the project's tracker, which a reader of the book has never seen.
TRACKER_WORDS = (
    (re.compile(r"\bthe issue\b", re.I), "the issue"),
    (re.compile(r"\bissue\s*#\s*\d*", re.I), "issue #"),
    (re.compile(r"\bissues? \d+\b", re.I), "issue 19"),
    (re.compile(r"\bthe case that started\b", re.I), "the case that started"),
    (re.compile(r"\btickets?\b", re.I), "ticket"),
)
REVIEWER = re.compile(r"\breviewers?\b", re.I)
NAN_CELL = re.compile(r"(?<![\w.])nan(?![\w.])", re.I)
TICK_OVERLAP = re.compile(r"tick labels overlap in the figure above", re.I)


def _excerpt(text: str, m: re.Match, width: int = 30) -> str:
    return " ".join(text[max(0, m.start() - width) : m.end() + width].split())


def object_reprs(info: PageInfo) -> list[str]:
    """Python object reprs (``<pkg.Thing object at 0x...>``) anywhere in the page text."""
    text = " ".join(info.all_text)
    return sorted({m.group(0) for m in OBJECT_REPR.finditer(text)})


def build_paths(info: PageInfo) -> list[str]:
    """Absolute paths of the build machine (/work/, /root/, /home/, /tmp/) in the page text."""
    text = " ".join(info.all_text)
    return sorted({m.group(0) for m in BUILD_PATH.finditer(text)})


def tracker_wording(info: PageInfo) -> list[str]:
    """Excerpts of prose that speaks the tracker's language ("the issue", "ticket", ...), and
    "reviewer" where the page neither links it to the glossary nor defines it as a term."""
    text = " ".join(" ".join(info.text).split())
    found = []
    for pattern, _ in TRACKER_WORDS:
        found += [f"...{_excerpt(text, m)}..." for m in pattern.finditer(text)]
    explained = any(REVIEWER.search(t) for t in info.term_links) or any(
        i.startswith("term-") and "reviewer" in i.lower() for i in info.ids
    )
    if not explained:
        found += [
            f"...{_excerpt(text, m)}... (unexplained: link it to the glossary)"
            for m in REVIEWER.finditer(text)
        ]
    return found


def nan_cells(info: PageInfo) -> list[str]:
    """Table cells that show NaN (a missing number the reader cannot interpret)."""
    return [c for c in info.cells if NAN_CELL.search(c)]


def looks_like_table(text: str) -> bool:
    """Does a plain-text output look like a table (a pandas frame or an aligned print)?

    Three or more lines, and at least half of the lines, that split into at least three
    columns on runs of two or more spaces; or pandas' wrapped-frame marker
    (a header line ending in a backslash). A shell command (first line ``$ ...``, continued
    with backslashes) is not a table."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].startswith("$ "):  # a shell command, continued with backslashes
        return False
    if any(ln.endswith(" \\") for ln in lines[:-1]) and len(lines) >= 3:
        return True
    counts = [len(re.split(r"\s{2,}", ln.strip())) for ln in lines]
    wide = [c for c in counts if c >= 3]
    return len(wide) >= 3 and 2 * len(wide) >= len(lines)


def text_tables(info: PageInfo) -> list[str]:
    """First lines of notebook outputs printed as plain-text tables (they wrap or clip in
    a narrow column; an HTML table is what the book shows)."""
    return [
        next((ln.strip() for ln in t.splitlines() if ln.strip()), "")[:60]
        for t in info.output_pres
        if looks_like_table(t)
    ]


def tick_overlaps(info: PageInfo) -> list[str]:
    """Notes left on the page by dpsynth.studies.notebook.show when a figure's tick labels
    overlap (dpsynth.studies.plots.tick_label_overlaps measured them with the renderer)."""
    text = " ".join(" ".join(info.all_text).split())
    return [_excerpt(text, m, 60) for m in TICK_OVERLAP.finditer(text)]


def content_problems(doc: str, info: PageInfo) -> list[str]:
    """The checks of what a page says, as opposed to how it renders: object reprs, build
    paths, tracker wording, NaN in tables, plain-text tables, overlapping tick labels."""
    problems = []
    for r in object_reprs(info)[:3]:
        problems.append(f"{doc}: a Python object repr in the page text: {r}")
    for path in build_paths(info)[:3]:
        problems.append(f"{doc}: an absolute path of the build machine in the page: {path}")
    for words in tracker_wording(info)[:3]:
        problems.append(f"{doc}: tracker wording a reader cannot follow: {words}")
    cells = nan_cells(info)
    if cells:
        problems.append(
            f"{doc}: {len(cells)} table cell(s) show NaN, e.g. {cells[0]!r} "
            "(say what is missing, or leave the cell empty with a note)"
        )
    for first in text_tables(info)[:3]:
        problems.append(
            f"{doc}: a plain-text table in an output (it wraps in a narrow column; show it "
            f"as HTML, e.g. dpsynth.studies.notebook.show_table): {first!r}"
        )
    for note in tick_overlaps(info)[:3]:
        problems.append(f"{doc}: a figure's tick labels overlap: ...{note}...")
    return problems


# ------------------------------------------------------------------- the server


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serve the build; pages requested with ?book-check=LIMIT get the probe script."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code == 404 and not self.path.startswith("/favicon.ico"):
            self.server.missing.add(urlsplit(self.path).path)  # type: ignore[attr-defined]
        super().send_error(code, message, explain)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if QUERY_FLAG not in query or not parts.path.endswith(".html"):
            return super().do_GET()
        path = Path(self.translate_path(parts.path))
        if not path.is_file():
            return super().do_GET()
        try:
            limit = int(query[QUERY_FLAG][0])
        except ValueError:
            limit = 20000
        script = "<script>" + PROBE_JS % {"limit": limit, "result_id": RESULT_ID} + "</script>"
        body = path.read_text(encoding="utf-8", errors="replace")
        cut = body.rfind("</body>")
        body = body[:cut] + script + body[cut:] if cut >= 0 else body + script
        data = body.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    missing: set[str]  # paths a page requested that the build does not have

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # the browser hung up: fine
            super().handle_error(request, client_address)


def start_server(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=str(root))
    server = QuietServer(("127.0.0.1", 0), handler)
    server.missing = set()
    threading.Thread(target=server.serve_forever, name="book-http", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


# ---------------------------------------------------------------------- browser


def run_chromium(chromium: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run one chromium call with a fresh profile; kill its process group on timeout."""
    profile = tempfile.mkdtemp(prefix="check-book-chromium-")
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise TimeoutError(
            f"chromium did not finish within {timeout:.0f} s: {' '.join(args)}"
        ) from None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def probe_url(url: str, budget_ms: int) -> str:
    return f"{url}?{QUERY_FLAG}={budget_ms}"


def dump_dom(chromium: str, url: str, timeout: float, width: int, budget_ms: int) -> str:
    """The page's DOM after its scripts (MathJax, the probe) ran, at a given window width."""
    res = run_chromium(
        chromium,
        [
            f"--window-size={width},{WINDOW_HEIGHT}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            probe_url(url, budget_ms),
        ],
        timeout,
    )
    dom = res.stdout.decode("utf-8", "replace")
    if res.returncode != 0 or not dom.strip():
        tail = res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise RuntimeError(
            f"chromium --dump-dom failed (exit {res.returncode}): {' | '.join(tail)}"
        )
    return dom


def screenshot(chromium: str, url: str, out: Path, timeout: float, budget_ms: int) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    res = run_chromium(
        chromium,
        [
            f"--screenshot={out}",
            "--window-size=1280,1600",
            f"--virtual-time-budget={budget_ms}",
            url,
        ],
        timeout,
    )
    if res.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        tail = res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise RuntimeError(f"screenshot failed (exit {res.returncode}): {' | '.join(tail)}")


# ------------------------------------------------------------------------ checks


def local_target(build: Path, base_url: str, page_url: str, ref: str) -> tuple[Path, str] | None:
    """Map a link or src on `page_url` to (file in build, fragment); None if not local."""
    if not ref or ref.startswith(SKIP_SCHEMES):
        return None
    absolute = urljoin(page_url, ref)
    parts = urlsplit(absolute)
    if not absolute.startswith(base_url):
        return None
    path = unquote(parts.path)
    rel = path[len(urlsplit(base_url).path) :]
    target = build / rel
    if path.endswith("/"):
        target = target / "index.html"
    return target, unquote(parts.fragment)


def is_image(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(256)
    return head.startswith(IMAGE_MAGIC) or b"<svg" in head or head.lstrip().startswith(b"<?xml")


@dataclass
class PageResult:
    problems: list[str] = field(default_factory=list)
    figures: int = 0
    formulas: int = 0


CUTOFF_WIDTH = 1280
"""Window width (px) from which no code block or table may need sideways scrolling."""


def cutoff_problems(at: str, cutoff: list[dict], width: int) -> list[str]:
    """Code blocks and tables wider than their box (the probe's ``cutoff``), at a window of
    :data:`CUTOFF_WIDTH` px or wider: on a laptop screen nothing on the page is cut off at the
    right (narrower windows may scroll code and tables inside themselves)."""
    if width < CUTOFF_WIDTH:
        return []
    return [
        f"{at}: {c.get('kind', 'block')} cut off at the right ({c.get('content')} px of content "
        f"in a {c.get('box')} px box): {c.get('text', '')!r}"
        for c in cutoff
    ]


def check_rendering(doc: str, info: PageInfo, width: int, first: bool) -> tuple[list[str], int]:
    """Checks 4-6 on one rendering; (problems, formulas). Math and images only at `first`."""
    at = f"{doc} at {width} px"
    p = info.probe
    if p is None:
        return [
            f"{at}: the page did not finish loading (no measurements; MathJax or an image may hang)"
        ], 0
    problems: list[str] = []
    if p.get("state") != "ok":
        problems.append(f"{at}: {p.get('state')}: MathJax or the images did not finish in time")
    if first:
        for url in sorted(set(p.get("external", [])))[:5]:
            problems.append(f"{doc}: loads {url} from another host (the book must render offline)")
        if p.get("mathjax") and not p["mathjax"].startswith(("http://127.0.0.1", "/")):
            problems.append(f"{doc}: MathJax is not served from the build ({p['mathjax']})")
        if info.math_errors:
            problems.append(
                f"{doc}: MathJax could not typeset {info.math_errors} formula(s) "
                "(TeX errors: MathJax_Error, mjx-merror or mjx-noError)"
            )
        untypeset = p.get("untypeset", [])
        if untypeset:
            problems.append(
                f"{doc}: {len(untypeset)} formula(s) not typeset, e.g. {untypeset[0]!r}"
            )
        places, snippets = raw_tex(info)
        if places:
            problems.append(
                f"{doc}: raw TeX in the rendered text at {places} place(s), e.g. "
                + " | ".join(f"...{s}..." for s in snippets)
            )
        for src in p.get("brokenImages", [])[:5]:
            problems.append(f"{doc}: broken image {src!r}")
        for src in p.get("pendingImages", [])[:5]:
            problems.append(f"{doc}: image {src!r} never finished loading")
    for clip in p.get("clipped", []):
        problems.append(
            f"{at}: clipped text in an output (cut off or only reachable by "
            f"scrolling it sideways): {clip}"
        )
    problems += cutoff_problems(at, p.get("cutoff", []), width)
    if p.get("scrollWidth", 0) > p.get("innerWidth", width) + 1:
        culprits = "; ".join(p.get("overflow", [])) or "no single element found"
        problems.append(
            f"{at}: page is {p['scrollWidth']} px wide, wider than the "
            f"{p['innerWidth']} px window (horizontal overflow): {culprits}"
        )
    return problems, int(p.get("formulas", 0)) if first else 0


def check_page(
    chromium: str,
    build: Path,
    base_url: str,
    doc: str,
    timeout: float,
    widths: list[int],
    budget_ms: int,
) -> PageResult:
    """Open one toc page in chromium at each width and run every per-page check."""
    url = base_url + doc + ".html"
    out = PageResult()
    if not (build / f"{doc}.html").is_file():
        out.problems.append(f"{doc}: listed in the table of contents but {doc}.html was not built")
        return out
    infos = []
    for i, width in enumerate(widths):
        try:
            info = parse_html(dump_dom(chromium, url, timeout, width, budget_ms))
        except (RuntimeError, TimeoutError) as exc:
            out.problems.append(f"{doc} at {width} px: {exc}")
            continue
        infos.append(info)
        problems, formulas = check_rendering(doc, info, width, first=(i == 0))
        out.problems += problems
        out.formulas += formulas
    if not infos:
        return out
    info = infos[0]
    if not info.title or info.title.lower().startswith(("error", "404")):
        out.problems.append(f"{doc}: bad page title {info.title!r}")
    if not (info.has_main and info.has_article):
        out.problems.append(f"{doc}: no main article in the rendered page")
    elif not info.headings:
        out.problems.append(f"{doc}: the article has no heading")
    out.problems += content_problems(doc, info)
    for cls in sorted(info.error_classes):
        out.problems.append(f"{doc}: the page contains error output (class {cls!r})")
    if doc.startswith("book/executed/"):
        for src in info.article_imgs:
            hit = local_target(build, base_url, url, src)
            if hit is None:
                out.problems.append(f"{doc}: figure src {src!r} is not served locally")
            elif not hit[0].is_file() or hit[0].stat().st_size == 0:
                out.problems.append(f"{doc}: figure {src!r} is missing or empty")
            elif not is_image(hit[0]):
                out.problems.append(f"{doc}: figure {src!r} is not an image file")
            else:
                try:
                    with urllib.request.urlopen(urljoin(url, src), timeout=timeout) as resp:
                        ok = resp.status == 200 and len(resp.read()) > 0
                except (urllib.error.URLError, OSError):
                    ok = False
                if ok:
                    out.figures += 1
                else:
                    out.problems.append(f"{doc}: figure {src!r} is not served")
        if out.figures == 0:
            out.problems.append(
                f"{doc}: notebook page shows no figure (expected at least one PNG output)"
            )
    return out


def check_links(build: Path, base_url: str) -> tuple[list[str], int]:
    """Check every internal href of every HTML file in the build; return (problems, count)."""
    pages = sorted(build.rglob("*.html"))
    parsed: dict[Path, PageInfo] = {}

    def info_of(path: Path) -> PageInfo:
        if path not in parsed:
            parsed[path] = parse_html(path.read_text(encoding="utf-8", errors="replace"))
        return parsed[path]

    broken: dict[str, list[str]] = {}
    count = 0
    for page in pages:
        page_url = base_url + page.relative_to(build).as_posix()
        for href in info_of(page).hrefs:
            hit = local_target(build, base_url, page_url, href)
            if hit is None:
                continue
            target, fragment = hit
            count += 1
            if not target.exists():
                reason = "missing page" if target.suffix == ".html" else "missing file"
            elif fragment and target.suffix == ".html" and fragment not in info_of(target).ids:
                reason = f"no id {fragment!r}"
            else:
                continue
            key = (
                f"{target.relative_to(build).as_posix()}#{fragment}"
                if fragment
                else target.relative_to(build).as_posix()
            )
            broken.setdefault(f"{key} ({reason})", []).append(page.relative_to(build).as_posix())
    problems = [
        f"broken link to {key}, from {', '.join(sorted(set(srcs))[:3])}"
        + (" ..." if len(set(srcs)) > 3 else "")
        for key, srcs in sorted(broken.items())
    ]
    return problems, count


# -------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "build", nargs="?", default="_build/html", help="the built HTML (default: _build/html)"
    )
    ap.add_argument(
        "--toc",
        default=str(REPO / "_toc.yml"),
        help="the table of contents the book was built with (default: the repo's _toc.yml; "
        "pass the variant given to `jupyter-book build --toc`)",
    )
    ap.add_argument(
        "--pages",
        nargs="+",
        metavar="DOC",
        help="quick mode: open only these toc pages (docnames or substrings, e.g. intro 01_beta)",
    )
    ap.add_argument(
        "--widths",
        nargs="+",
        type=int,
        default=list(DEFAULT_WIDTHS),
        metavar="PX",
        help="window widths for the overflow check; math and images are checked at the "
        f"first (default: {' '.join(map(str, DEFAULT_WIDTHS))})",
    )
    ap.add_argument("--no-screenshot", action="store_true", help="skip the intro screenshot")
    ap.add_argument(
        "--screenshot-dir",
        default=None,
        help="where intro.png goes (default: _build/screenshots, beside the build)",
    )
    ap.add_argument(
        "--chromium",
        default=os.environ.get("CHROMIUM", DEFAULT_CHROMIUM),
        help=f"the browser (default: $CHROMIUM or {DEFAULT_CHROMIUM})",
    )
    ap.add_argument(
        "--timeout", type=float, default=90.0, help="seconds allowed per chromium call (default 90)"
    )
    ap.add_argument(
        "--budget",
        type=int,
        default=20000,
        help="virtual milliseconds a page gets to load, typeset and lay out (default 20000)",
    )
    ap.add_argument("--jobs", type=int, default=2, help="chromium calls in parallel (default 2)")
    args = ap.parse_args(argv)

    build = Path(args.build).resolve()
    try:
        if not (build / "index.html").is_file():
            raise SetupError(f"no built book at {build} (run `make book` first)")
        chromium = shutil.which(args.chromium) or ""
        if not chromium or not os.access(chromium, os.X_OK):
            raise SetupError(
                f"chromium not found at {args.chromium}; "
                "install it with `apt-get install -y chromium` or pass --chromium PATH"
            )
        if not args.widths or min(args.widths) < 200:
            raise SetupError("--widths must be window widths of at least 200 px")
        all_docs = toc_docnames(Path(args.toc))
        docs = all_docs
        if args.pages:
            selected = []
            for p in args.pages:  # exact docname or file name first, else substring
                exact = [d for d in docs if p in (d, d.rsplit("/", 1)[-1])]
                selected += [d for d in (exact or [d for d in docs if p in d]) if d not in selected]
            if not selected:
                raise SetupError(f"--pages {' '.join(args.pages)} matches no page of {args.toc}")
            docs = selected
    except SetupError as exc:
        print(f"book check: cannot run: {exc}", file=sys.stderr)
        return 2

    server, base_url = start_server(build)
    problems: list[str] = []
    figures = formulas = 0
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = pool.map(
                lambda d: check_page(
                    chromium, build, base_url, d, args.timeout, args.widths, args.budget
                ),
                docs,
            )
            for res in results:
                problems += res.problems
                figures += res.figures
                formulas += res.formulas
        link_problems, links = check_links(build, base_url)
        problems += link_problems
        missing = sorted(server.missing)  # type: ignore[attr-defined]
        if missing:
            problems.append(
                f"the pages requested {len(missing)} file(s) the build does not have "
                f"(scripts, styles, fonts, images): {', '.join(missing[:5])}"
                + (" ..." if len(missing) > 5 else "")
            )
        if not args.no_screenshot:
            shots = (
                Path(args.screenshot_dir) if args.screenshot_dir else build.parent / "screenshots"
            )
            intro = next((d for d in all_docs if d.endswith("intro")), None) or all_docs[0]
            try:
                screenshot(
                    chromium,
                    base_url + intro + ".html",
                    shots / "intro.png",
                    args.timeout,
                    args.budget,
                )
            except (RuntimeError, TimeoutError) as exc:
                problems.append(f"screenshot of {intro}: {exc}")
    finally:
        server.shutdown()
        server.server_close()

    summary = (
        f"book check: {len(docs)} pages at {'/'.join(map(str, args.widths))} px, "
        f"{figures} figures, {links} internal links, {formulas} formulas"
    )
    if problems:
        print(f"{summary}: {len(problems)} problem(s)")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(f"{summary}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
