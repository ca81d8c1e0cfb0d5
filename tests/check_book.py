#!/usr/bin/env python3
"""Check the built book in a real headless browser.

Usage:
    python tests/check_book.py [BUILD_DIR] [--pages DOC ...] [--no-screenshot]

BUILD_DIR defaults to _build/html. The site is served from a local http.server
on 127.0.0.1 (a random free port, in a thread) and every page is opened with
Debian's headless chromium. The checks:

1. every page listed in _toc.yml loads: the browser's DOM has a title, a main
   article with a heading, and no Sphinx/docutils error markup
   (system-message, problematic) or notebook error output (traceback);
2. every notebook page under book/executed/ shows at least one figure: an
   <img> in the article whose src resolves to an existing, non-empty image file;
3. no internal link anywhere in the built site is broken: every href to a local
   page or file exists, and every #anchor exists as an id in its target page;
4. a screenshot of the intro page is written to _build/screenshots/intro.png.

It prints one summary line, `book check: N pages, M figures, K internal links: OK`,
and exits 0; otherwise it lists the problems and exits 1 (2 if it cannot run:
no build, no chromium). Chromium is denied every host but 127.0.0.1, so nothing
is downloaded; MathJax, which the pages load from a CDN, is therefore not
rendered in the screenshot. Not a pytest test: `make book` runs it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import html.parser
import http.server
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
from urllib.parse import unquote, urljoin, urlsplit

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CHROMIUM = "/usr/bin/chromium"
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
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF")
SKIP_SCHEMES = ("mailto:", "javascript:", "data:", "tel:")


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
    ids: set[str] = field(default_factory=set)
    hrefs: list[str] = field(default_factory=list)


class PageParser(html.parser.HTMLParser):
    """Collect title, article, headings, images, ids, links and error markup."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
            "meta", "param", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.info = PageInfo()
        self._stack: list[tuple[str, bool]] = []  # (tag, opens the article)
        self._in_title = False
        self._heading: list[str] | None = None

    @property
    def _in_article(self) -> bool:
        return any(is_article for _, is_article in self._stack)

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
        is_article = tag == "article" or "bd-article" in classes
        if is_article:
            self.info.has_article = True
        self.info.error_classes |= classes & ERROR_CLASSES
        if self._in_article or is_article:
            if tag == "img":
                self.info.article_imgs.append(a.get("src", ""))
            if tag in ("h1", "h2"):
                self._heading = []
        if tag not in self.VOID:
            self._stack.append((tag, is_article))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID and self._stack and self._stack[-1][0] == tag:
            self._stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in ("h1", "h2") and self._heading is not None:
            self.info.headings.append(" ".join("".join(self._heading).split()).rstrip("#"))
            self._heading = None
        for i in range(len(self._stack) - 1, -1, -1):  # tolerate unclosed tags
            if self._stack[i][0] == tag:
                del self._stack[i:]
                break

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.info.title += data
        if self._heading is not None:
            self._heading.append(data)


def parse_html(text: str) -> PageInfo:
    parser = PageParser()
    parser.feed(text)
    parser.close()
    parser.info.title = " ".join(parser.info.title.split())
    return parser.info


# ------------------------------------------------------------------- the server


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # the browser hung up: fine
            super().handle_error(request, client_address)


def start_server(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=str(root))
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name="book-http", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


# ---------------------------------------------------------------------- browser


def run_chromium(chromium: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run one chromium call with a fresh profile; kill its process group on timeout."""
    profile = tempfile.mkdtemp(prefix="check-book-chromium-")
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise TimeoutError(f"chromium did not finish within {timeout:.0f} s: {' '.join(args)}") from None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def dump_dom(chromium: str, url: str, timeout: float) -> str:
    res = run_chromium(chromium, ["--dump-dom", url], timeout)
    dom = res.stdout.decode("utf-8", "replace")
    if res.returncode != 0 or not dom.strip():
        tail = res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise RuntimeError(f"chromium --dump-dom failed (exit {res.returncode}): {' | '.join(tail)}")
    return dom


def screenshot(chromium: str, url: str, out: Path, timeout: float) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    res = run_chromium(chromium, [f"--screenshot={out}", "--window-size=1280,1600", url], timeout)
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
    rel = path[len(urlsplit(base_url).path):]
    target = build / rel
    if path.endswith("/"):
        target = target / "index.html"
    return target, unquote(parts.fragment)


def is_image(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(256)
    return head.startswith(IMAGE_MAGIC) or b"<svg" in head or head.lstrip().startswith(b"<?xml")


def check_page(chromium: str, build: Path, base_url: str, doc: str,
               timeout: float) -> tuple[list[str], int]:
    """Open one toc page in chromium; return (problems, number of valid figures)."""
    url = base_url + doc + ".html"
    problems: list[str] = []
    if not (build / f"{doc}.html").is_file():
        return [f"{doc}: listed in _toc.yml but {doc}.html was not built"], 0
    try:
        info = parse_html(dump_dom(chromium, url, timeout))
    except (RuntimeError, TimeoutError) as exc:
        return [f"{doc}: {exc}"], 0
    if not info.title or info.title.lower().startswith(("error", "404")):
        problems.append(f"{doc}: bad page title {info.title!r}")
    if not (info.has_main and info.has_article):
        problems.append(f"{doc}: no main article in the rendered page")
    elif not info.headings:
        problems.append(f"{doc}: the article has no heading")
    for cls in sorted(info.error_classes):
        problems.append(f"{doc}: the page contains error output (class {cls!r})")
    figures = 0
    if doc.startswith("book/executed/"):
        for src in info.article_imgs:
            hit = local_target(build, base_url, url, src)
            if hit is None:
                problems.append(f"{doc}: figure src {src!r} is not served locally")
            elif not hit[0].is_file() or hit[0].stat().st_size == 0:
                problems.append(f"{doc}: figure {src!r} is missing or empty")
            elif not is_image(hit[0]):
                problems.append(f"{doc}: figure {src!r} is not an image file")
            else:
                try:
                    with urllib.request.urlopen(urljoin(url, src), timeout=timeout) as resp:
                        ok = resp.status == 200 and len(resp.read()) > 0
                except (urllib.error.URLError, OSError):
                    ok = False
                if ok:
                    figures += 1
                else:
                    problems.append(f"{doc}: figure {src!r} is not served")
        if figures == 0:
            problems.append(f"{doc}: notebook page shows no figure (expected at least one PNG output)")
    return problems, figures


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
            key = f"{target.relative_to(build).as_posix()}#{fragment}" if fragment else \
                target.relative_to(build).as_posix()
            broken.setdefault(f"{key} ({reason})", []).append(page.relative_to(build).as_posix())
    problems = [f"broken link to {key}, from {', '.join(sorted(set(srcs))[:3])}"
                + (" ..." if len(set(srcs)) > 3 else "")
                for key, srcs in sorted(broken.items())]
    return problems, count


# -------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default="_build/html", help="the built HTML (default: _build/html)")
    ap.add_argument("--toc", default=str(REPO / "_toc.yml"), help="the table of contents (default: repo _toc.yml)")
    ap.add_argument("--pages", nargs="+", metavar="DOC",
                    help="quick mode: open only these toc pages (docnames or substrings, e.g. intro 01_beta)")
    ap.add_argument("--no-screenshot", action="store_true", help="skip the intro screenshot")
    ap.add_argument("--screenshot-dir", default=None,
                    help="where intro.png goes (default: _build/screenshots, beside the build)")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM", DEFAULT_CHROMIUM),
                    help=f"the browser (default: $CHROMIUM or {DEFAULT_CHROMIUM})")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per chromium call (default 60)")
    ap.add_argument("--jobs", type=int, default=2, help="chromium calls in parallel (default 2)")
    args = ap.parse_args(argv)

    build = Path(args.build).resolve()
    try:
        if not (build / "index.html").is_file():
            raise SetupError(f"no built book at {build} (run `make book` first)")
        chromium = shutil.which(args.chromium) or ""
        if not chromium or not os.access(chromium, os.X_OK):
            raise SetupError(f"chromium not found at {args.chromium}; "
                             "install it with `apt-get install -y chromium` or pass --chromium PATH")
        docs = toc_docnames(Path(args.toc))
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
    figures = 0
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = pool.map(lambda d: check_page(chromium, build, base_url, d, args.timeout), docs)
            for page_problems, page_figures in results:
                problems += page_problems
                figures += page_figures
        link_problems, links = check_links(build, base_url)
        problems += link_problems
        if not args.no_screenshot:
            shots = Path(args.screenshot_dir) if args.screenshot_dir else build.parent / "screenshots"
            intro = next((d for d in toc_docnames(Path(args.toc)) if d.endswith("intro")), None) \
                or toc_docnames(Path(args.toc))[0]
            try:
                screenshot(chromium, base_url + intro + ".html", shots / "intro.png", args.timeout)
            except (RuntimeError, TimeoutError) as exc:
                problems.append(f"screenshot of {intro}: {exc}")
    finally:
        server.shutdown()
        server.server_close()

    summary = f"book check: {len(docs)} pages, {figures} figures, {links} internal links"
    if problems:
        print(f"{summary}: {len(problems)} problem(s)")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(f"{summary}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
