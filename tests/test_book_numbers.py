"""No hand-copied results in the book: numbers in prose come from a computation.

The pages that report results (the guidance pages and the executed chapters' text) may quote a
measured number only through glue (``{glue:text}`key:fmt```, a ``{glue}`` directive, possibly
from another page with ``path::key``), so that the number is the one this build computed. The
test reads each page's prose (code, maths, roles and links removed) and fails on every decimal
number or percentage that is not in the page's :data:`ALLOWED` list, where each entry says why
the number is not a result (a setting, a threshold, a definition, the paper's own value, a
worked example). Integers are not checked (counts of records, sets, chains, years, ...).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, dict[str, str]] = {
    "book/which_mechanism.md": {
        "1.1": "an example of a public reference value in a command line",
        "0.4": "an example of a public reference value in a command line",
        "1.01": "the convergence threshold of a strict-DP release (a setting)",
        "95%": "the intervals' nominal level (a definition)",
    },
    "book/choosing.md": {
        "0.5": "a worked example's data",
        "0.6": "a worked example's data",
        "1.0": "a worked example's data",
    },
    "book/privacy_audit.md": {
        "0.5": "the audit's constructed database",
        "0.1": "the audit's constructed database",
        "0.9": "the audit's constructed database",
        "90%": "the threshold rule of the audit (a setting)",
        "0.3": "the audit's constructed database",
        "0.7": "the audit's constructed database",
        "1.0": "the audit's constructed database (the outlier at the edge)",
        "0.8": "the changed record's value in the example (a setting)",
        "1.5": "the range the figure moves the changed record over (a setting)",
        "1.38": "log-density of Normal(0, 0.1^2) at its mean, a closed form",
    },
    "book/scaling.md": {},
    "book/quickstart.md": {"3.11": "the Python version required"},
    "book/glossary.md": {},
    "notebooks/01_beta_censoring.md": {
        "0.5": "the data-generating Beta(0.5, 3) (the paper's setting)",
        "0.9": "the downscaling factor of Section 4.4 (a setting)",
        "1.01": "the R-hat threshold of releases (a setting)",
        "1.05": "the R-hat threshold of the notebooks (a setting)",
        "3.5": "the paper's own statement of its bounds (about 2 to 3.5), quoted as such",
        "4.1": "part of the section range 4.1-4.4 (a reference)",
    },
    "notebooks/02_sdr_censoring.md": {
        "1.05": "the R-hat threshold of the notebooks (a setting)",
        "5%": "the tolerance of the weight search (a setting)",
        "5.24": "the paper's Weighted epsilon, quoted as the search's target",
        "10%": "a stated comparison tolerance (a setting)",
        "30%": "a stated comparison tolerance (a setting)",
    },
    "notebooks/06_local_to_global.md": {
        "1.05": "the R-hat threshold of the notebooks (a setting)",
    },
    "notebooks/03_vector_weighting.md": {
        "0.2": "the paper's mixture weights (the data-generating setting)",
        "0.8": "the paper's mixture weights (the data-generating setting)",
        "1.05": "the R-hat threshold of the notebooks (a setting)",
        "1.01": "the R-hat threshold of releases (a setting)",
    },
    "notebooks/04_reweighting.md": {
        "1%": "the tolerance of the k search (a setting)",
        "95%": "the intervals' nominal level (a definition)",
        "1.05": "the R-hat threshold of the notebooks (a setting)",
        "2.5%": "the quantiles that make a 95% interval (a definition)",
        "97.5%": "the quantiles that make a 95% interval (a definition)",
        "0.95": "the paper's k (a setting)",
    },
    "notebooks/05_sdr_salary.md": {
        "1.05": "the R-hat threshold of the notebooks (a setting)",
    },
    "notebooks/07_modips_inference.md": {
        "95%": "the intervals' nominal level (a definition)",
        "0.01": "the paper's value (Liu's text), quoted as such",
        "0.002": "epsilon / m of the example, from the settings",
    },
    "notebooks/08_synthesize_your_own.md": {
        "1.01": "the convergence threshold of a strict-DP release (a setting)",
    },
    "notebooks/09_real_data.md": {
        "10%": "the target's tolerance (a setting)",
        "1.5": "the target's tolerance (a setting)",
        "95%": "the intervals' nominal level (a definition)",
    },
}
"""Per page: the decimal numbers and percentages its prose may contain, and why."""

NUMBER = re.compile(r"(?<![\w.§/-])(\d+\.\d+ ?%?|\d+ ?%)(?!\.?\d)(?![A-Za-z_])")
REFERENCE = re.compile(
    r"(§|Sections?|Figures?|Tables?|Algorithm|Theorem|appendix|Eq\.|version)\s*\d+(\.\d+)*"
)


def prose(text: str) -> str:
    """The text a reader reads as sentences: no front matter, code, maths, roles or links."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    text = re.sub(r"^(`{3,}|:{3,}).*?^\1\s*$", "", text, flags=re.S | re.M)
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", "", text)
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", "", text)  # roles, glue included
    text = re.sub(r"`[^`]*`", "", text, flags=re.S)  # inline code, also across lines
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    return REFERENCE.sub("", text)


def quoted_numbers(text: str) -> list[str]:
    """Decimal numbers and percentages in ``text``'s prose, in order ("95 %" as "95%")."""
    return [m.group(1).replace(" ", "") for m in NUMBER.finditer(prose(text))]


def test_quoted_numbers_finds_results_and_skips_code_maths_and_glue():
    text = (
        "The overlap was 0.69 (paper 0.54), 41% zeros.\n"
        "A glued {glue:text}`overlap:.2f` and `code 0.5` and $\\epsilon = 0.3$.\n"
        "See Section 5.1 and §4.5; version 3.11.\n"
        "```{code-cell} ipython3\nx = 0.25\n```\n"
    )
    assert quoted_numbers(text) == ["0.69", "0.54", "41%"]


@pytest.mark.parametrize("page", sorted(ALLOWED))
def test_page_quotes_no_hand_copied_number(page):
    allowed = ALLOWED[page]
    found = quoted_numbers((ROOT / page).read_text(encoding="utf-8"))
    hand = sorted({n for n in found if n not in allowed})
    assert not hand, (
        f"{page} quotes {hand} in its prose: glue them from the notebook or computation that "
        f"produces them, or, if they are settings or definitions, list them in ALLOWED with why"
    )
