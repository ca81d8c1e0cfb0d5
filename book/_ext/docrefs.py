"""API-reference helpers of the dpsynth book (a Sphinx extension loaded from _config.yml).

The library's docstrings are written to read well as plain text (``help()``, an editor);
two of their habits are not reStructuredText, and the book renders them as intended
instead of failing the -W build:

* **Plain-text math.** ``|alpha_i f(x_i)|`` (an absolute value) is a substitution
  reference to docutils, and ````points_per_dim````\\ ``^p`` (an inline literal followed
  by a letter or ``^``) an unterminated literal. Outside literals, roles, literal blocks
  and tables, the ``|`` are escaped and an escaped space separates the literal from what
  follows. A docstring that is already valid reST is left unchanged.
* **Short names.** ``:func:`secure_generator``` in ``dpsynth.mechanisms.modips`` names an object that
  module imports from ``dpsynth.privacy.accounting``. When Python's usual lookup fails, a reference
  resolves to the one documented object with that name, if there is exactly one; an
  ambiguous or unknown name stays a broken reference (and fails the nitpicky build).
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.util.nodes import make_refnode

# Inline literals and interpreted text (roles) are copied as they are.
_LITERAL_OR_ROLE = re.compile(r"``.+?``|(?::[\w:+.-]+:)?`[^`]+`(?:__?)?")
# What docutils accepts right after an inline literal's end-string.
_END_OK = set(" \t-.,:;!?\\/'\")]}>")
# ... and right before its start-string.
_START_OK = set(" \t-:/'\"<([{")


def _fix_text(text: str) -> str:
    """Escape ``|`` in plain text; separate inline literals glued to the next word."""
    out: list[str] = []
    pos = 0
    for m in _LITERAL_OR_ROLE.finditer(text):
        out.append(text[pos : m.start()].replace("|", r"\|"))
        token = m.group(0)
        if token.startswith("``"):
            before = text[m.start() - 1] if m.start() > 0 else " "
            after = text[m.end()] if m.end() < len(text) else " "
            if before not in _START_OK:
                token = "\\ " + token
            if after not in _END_OK:
                token = token + "\\ "
        out.append(token)
        pos = m.end()
    out.append(text[pos:].replace("|", r"\|"))
    return "".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def normalize_docstring(lines: list[str]) -> list[str]:
    """The docstring's lines with plain-text math made valid reST (see the module doc)."""
    result: list[str] = []
    literal_indent: int | None = None  # inside a literal block opened at this indent
    pending: int | None = None  # a line ending in "::" at this indent was seen
    for line in lines:
        stripped = line.strip()
        if literal_indent is not None:
            if not stripped or _indent(line) > literal_indent:
                result.append(line)
                continue
            literal_indent = None
        if pending is not None:
            if not stripped:
                result.append(line)
                continue
            if _indent(line) > pending:
                literal_indent = pending
                pending = None
                result.append(line)
                continue
            pending = None
        if (
            not stripped
            or stripped.startswith((">>>", "...", "|", "+", ".. "))
            or ("|" not in line and "``" not in line)
        ):
            result.append(line)
        else:
            result.append(_fix_text(line))
        if stripped.endswith("::") or stripped.startswith(".. code"):
            pending = _indent(line)
    return result


def process_docstring(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    lines[:] = normalize_docstring(lines)


def resolve_short_name(
    app: Any, env: Any, node: nodes.Element, contnode: nodes.Element
) -> nodes.Element | None:
    """Resolve a Python reference by name suffix when it names one documented object."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target or target.startswith("_") or "._" in target:
        return None
    domain = env.get_domain("py")
    suffix = "." + target
    matches = [
        (name, obj)
        for name, obj in domain.objects.items()
        if name.endswith(suffix) and not obj.aliased
    ]
    if len(matches) != 1:
        return None
    name, obj = matches[0]
    return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, name)


def setup(app: Any) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", process_docstring)
    app.connect("missing-reference", resolve_short_name, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
