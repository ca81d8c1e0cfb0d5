"""Citation style of the dpsynth book (a Sphinx extension loaded from _config.yml).

Registers ``author_year_round`` with sphinxcontrib-bibtex: author-year references in
round brackets, authors joined without a serial comma and no comma before the year,
which is how the book's prose cites the papers:

* ``{cite:ts}`hu2022mechanisms``` -> Hu, Williams and Savitsky (2022)
* ``{cite:ts}`hu2022mechanisms{§2.1}``` -> Hu, Williams and Savitsky (2022, §2.1)
* ``{cite:ps}`liu2022modips{Theorem 7}``` -> (Liu 2022, Theorem 7)
* ``{cite:p}`dwork2006calibrating``` -> (Dwork et al. 2006)
* ``Reiter's {cite:yearpar}`reiter2003inference``` -> Reiter's (2003)
* ``{cite:ps}`a,b``` -> (A 2003; B and C 2016)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sphinxcontrib.bibtex.plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle, PersonStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle


def _round() -> BracketStyle:
    return BracketStyle(left="(", right=")", sep="; ")


def _persons() -> PersonStyle:
    return PersonStyle(last_sep=" and ")


@dataclass
class RoundAuthorYearReferenceStyle(AuthorYearReferenceStyle):
    """Author-year citations in round brackets: (Liu 2022), Liu (2022)."""

    bracket_parenthetical: BracketStyle = field(default_factory=_round)
    bracket_textual: BracketStyle = field(default_factory=_round)
    bracket_author: BracketStyle = field(default_factory=_round)
    bracket_label: BracketStyle = field(default_factory=_round)
    bracket_year: BracketStyle = field(default_factory=_round)
    person: PersonStyle = field(default_factory=_persons)
    author_year_sep: str = " "


sphinxcontrib.bibtex.plugin.register_plugin(
    "sphinxcontrib.bibtex.style.referencing", "author_year_round", RoundAuthorYearReferenceStyle
)


def setup(app):  # noqa: ANN001, ANN201 - Sphinx extension entry point
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
