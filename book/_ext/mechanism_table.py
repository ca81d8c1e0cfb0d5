"""The book's table of mechanisms, generated from :mod:`dpsynth.mechanisms.registry` when the book is built.

A Sphinx extension loaded from _config.yml. In a page::

    ```{mechanism-table}
    :columns: mechanism, paper's name, guarantee, neighbours, what it does
    ```

renders one row per declared mechanism (:func:`dpsynth.mechanisms.registry.table`), so a mechanism
added to the registry appears in every such table and no page lists the mechanisms by hand.
Without ``:columns:`` every column of :func:`dpsynth.mechanisms.registry.table` is shown.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive, directives


def _row(cells: list[str], literal_first: bool) -> nodes.row:
    row = nodes.row()
    for j, text in enumerate(cells):
        entry = nodes.entry()
        para = nodes.paragraph()
        para += nodes.literal(text, text) if (literal_first and j == 0) else nodes.Text(text)
        entry += para
        row += entry
    return row


def mechanism_table(columns: list[str] | None = None) -> nodes.table:
    """A docutils table of the registry's mechanisms (``columns``: a subset, in order)."""
    from dpsynth.mechanisms import registry

    rows = registry.table()
    names = columns or list(rows[0])
    unknown = [c for c in names if c not in rows[0]]
    if unknown:
        raise ValueError(f"mechanism-table: unknown columns {unknown}; choose from {list(rows[0])}")
    table = nodes.table(classes=["mechanism-table"])
    group = nodes.tgroup(cols=len(names))
    table += group
    for _ in names:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    head += _row(names, literal_first=False)
    group += head
    body = nodes.tbody()
    for r in rows:
        body += _row([r[c] for c in names], literal_first=names[0] == "mechanism")
    group += body
    return table


class MechanismTable(Directive):
    """``mechanism-table``: the registry's mechanisms as a table (``:columns:`` optional)."""

    has_content = False
    option_spec = {"columns": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        spec = self.options.get("columns")
        columns = [c.strip() for c in spec.split(",")] if spec else None
        return [mechanism_table(columns)]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("mechanism-table", MechanismTable)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
