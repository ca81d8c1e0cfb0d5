"""No hand-copied results in the book: numbers in prose come from a computation.

The pages that report results (the guidance pages and the executed chapters' text) may quote a
measured number only through glue (``{glue:text}`key:fmt```, a ``{glue}`` directive, possibly
from another page with ``path::key``), so that the number is the one this build computed. The
test reads each page's prose (code, maths, roles and links removed) and fails on every decimal
number or percentage that is not in the page's :data:`ALLOWED` list, where each entry says why
the number is not a result (a setting, a threshold, a definition, the paper's own value, a
worked example). Integers are not checked (counts of records, sets, chains, years, ...).
Every book page is read, except those listed in :data:`NOT_COVERED` with why.

A second check makes sure glue cannot silently show nothing: every key a page uses is glued by
the page's own code or by the page it names; the choices page, which glues whole files under a
prefix, must quote only quantities those files hold.
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
    "book/threat_model.md": {},
    "book/faults.md": {},
    "book/quickstart.md": {"3.11": "the Python version required"},
    "book/install.md": {
        "3.11": "the Python version required",
        "2.35": "the Stan version httpstan ships (a version)",
        "2.7": "the MathJax version Debian ships (a version)",
    },
    "book/glossary.md": {},
    "book/reproduction.md": {
        "5.24": "the paper's Table 2 Weighted epsilon, quoted as the tuning's target",
        "0.95": "the re-weighting constant k (a setting)",
        "0.9": "the downscaling factor (a setting)",
        "3.5": "the paper's own statement of its bounds (about 2 to 3.5), quoted as such",
    },
    "book/choices.md": {
        "0.5": "the data-generating Beta(0.5, 3) (the paper's setting); a calibrate_share "
        "the PH-calibration investigation sets",
        "0.3": "a calibrate_share the PH-calibration investigation sets (a setting)",
        "0.0057": "the paper's Table 2 avg-ECDF of PH, quoted as such",
        "0.131": "the paper's Table 2 max-ECDF of PH, quoted as such",
        "5.24": "the paper's Table 2 Weighted epsilon, quoted as the tuning's target",
        "5.22": "the paper's Table 2 Weighted-e epsilon, quoted as such",
        "5%": "the tolerance of the LW weight tuning (a setting)",
        "0.95": "the paper's k (a setting)",
        "1%": "the tolerance of the library's k search (a setting)",
        "1.05": "the R-hat threshold of the notebooks (a setting)",
        "3.5": "the paper's own statement of its bounds (about 2 to 3.5), quoted as such",
        "0.75": "the smallest downscaling factor an earlier exploration tried (a setting)",
        "0.9": "the downscaling factor (a setting), the largest that exploration tried",
        "1.96": "the normal quantile of a 95% interval (a definition)",
        "74.3": "an endpoint of the paper's appendix Table 1, quoted as such",
        "95%": "the intervals' nominal level (a definition)",
        "0.01": "the paper's value (Liu's text), quoted as such",
        "0.925": "the paper's coverage at m = 2 (Liu's text), quoted as such",
        "0.91": "the paper's coverage at m = 2 (Liu's text), quoted as such",
        "0.25": "an offset between chains the R-hat investigation sets (a setting)",
        "0.8": "a lag-1 autocorrelation the R-hat investigation sets (a setting)",
        "1.01": "the convergence policy's fixed R-hat limit (a setting)",
    },
    "book/by_hand.md": {"0.5": "the data-generating Beta(0.5, 3) (the paper's setting)"},
    "book/censoring.md": {"0.5": "the data-generating Beta(0.5, 3) (the paper's setting)"},
    "book/dp_primer.md": {
        "0.5": "the data-generating Beta(0.5, 3) (the paper's setting)",
        "5.99": "2 log 20, the closed-form bound of the worked example",
    },
    "book/cli_refusals.md": {
        "1.01": "the convergence threshold of a strict-DP release (a setting)"
    },
    "book/modips.md": {
        "2.1": "step 2.1 of the algorithm (a reference)",
        "0.9": "the worked example's posterior bin probability (its data)",
        "0.04": "the exercise's within- and between-set variances (its data)",
        "0.0533": "the exercise's total variance, worked out in its solution",
    },
    "book/reweighting.md": {
        "0.5": "the data-generating Beta(0.5, 3) (the paper's setting)",
        "0.95": "the paper's k (a setting)",
        "1%": "the tolerance of the k search (a setting)",
        "0.4": "the worked example's weight (its data)",
    },
    "book/stan_convention.md": {
        "0.001": "the level of the distribution tests (a setting)",
        "0.5": "a placeholder value the program checks try (a setting)",
        "0.25": "a placeholder value the program checks try (a setting)",
        "0.75": "a placeholder value the program checks try (a setting)",
    },
    "book/utility_verdict.md": {
        "95%": "the intervals' nominal level and a quantile level (definitions)",
        "3%": "the public reference period's income shift in the example (a setting)",
        "20%": "the drifted reference period's income shift in the example (a setting)",
        "10%": "the goal's tolerance on the mean (a setting)",
        "1.5": "the goal's tolerance on max-ECDF, relative to PH's (a setting)",
    },
    "book/cli.md": {},
    "book/rerun.md": {},
    "book/intro.md": {},
    "book/syllabus.md": {},
    "book/pseudo_posterior.md": {},
    "book/bibliography.md": {},
    "book/api.md": {},
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
        "3.5": "the paper's own sentence about its global bound, quoted as such",
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
    "book/whole_table.md": {
        "0.3": "calibrate_share's default (a setting, table_spec.CALIBRATE_SHARE)",
        "1.01": "the convergence policy's fixed R-hat limit (a setting)",
    },
    "notebooks/10_whole_table.md": {
        "1.5": "the issue's goal: within 1.5 times AIM's two-way TVD (a setting)",
        "30%": "calibrate_share's default (a setting, table_spec.CALIBRATE_SHARE)",
    },
    "notebooks/09_real_data.md": {
        "10%": "the target's tolerance (a setting)",
        "1.5": "the target's tolerance (a setting)",
        "95%": "the intervals' nominal level (a definition)",
    },
}
"""Per page: the decimal numbers and percentages its prose may contain, and why."""

NOT_COVERED: dict[str, str] = {}
"""Book pages the test does not read yet, and why. Every other book page must be in ALLOWED."""

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


def test_every_book_page_is_covered():
    pages = {str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.md")}
    missing = sorted(pages - set(ALLOWED) - set(NOT_COVERED))
    assert not missing, f"book pages not read for hand-copied numbers: {missing} (add to ALLOWED)"


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


# ---------------------------------------------------------------- glue keys have a source

GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`]+)`")
GLUE_DIRECTIVE = re.compile(r"^```\{glue(?::\w+)?\}\s+(\S+)\s*\n(?::doc:\s*(\S+))?", re.M)
GLUE_CALL = re.compile(r"\bglue\(\s*(f?)(['\"])(.+?)\2")
GLUE_HELPER = re.compile(r"\bglue_(numbers|tables)\(")


def used_glue_keys(text: str) -> list[tuple[str, str]]:
    """(page path or "", key) of every glue role and directive in ``text``."""
    used = []
    for m in GLUE_ROLE.finditer(text):
        ref = m.group(1).rsplit(":", 1)[0] if "::" not in m.group(1) else m.group(1)
        page, _, key = ref.rpartition("::")
        used.append((page, key.split(":")[0] if page else ref))
    for m in GLUE_DIRECTIVE.finditer(text):
        used.append((m.group(2) or "", m.group(1)))
    return used


def _call_args(text: str, start: int) -> str:
    """The text between the parenthesis opened just before ``start`` and its match."""
    depth, i = 1, start
    while depth and i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1]


CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)
STRING = re.compile(r"['\"](\w+)['\"]")


def glued_keys(text: str) -> list[re.Pattern[str]]:
    """Patterns of the keys a page's code glues: ``glue("key", ...)``, ``glue(f"p_{x}", ...)``
    (any text in place of a replacement field), and the notebook helpers ``glue_numbers`` (dict
    literal keys with their ``prefix``; any key with that prefix when the dict is not a
    literal) and ``glue_tables`` (dict literal keys). A ``glue(name, ...)`` whose key is
    computed may glue any string literal of the page's code, as written or lower-cased (the
    keys of a dict it loops over, names it lower-cases)."""
    patterns = []
    code = "\n".join(CODE_CELL.findall(text))
    if re.search(r"\bglue\(\s*(?!f?['\"])", code):
        words = set(STRING.findall(code))
        patterns += [re.compile(re.escape(w) + r"\Z") for w in words | {w.lower() for w in words}]
    for m in GLUE_CALL.finditer(text):
        key = m.group(3)
        parts = re.split(r"\{[^}]*\}", key) if m.group(1) else [key]
        patterns.append(re.compile(".+".join(map(re.escape, parts)) + r"\Z"))
    for m in GLUE_HELPER.finditer(text):
        args = _call_args(text, m.end())
        prefix = re.search(r"prefix\s*=\s*['\"]([^'\"]*)['\"]", args)
        prefix = prefix.group(1) if prefix else ""
        literal = args.lstrip().startswith("{") and " for " not in args.split(":", 1)[0]
        keys = re.findall(r"['\"](\w+)['\"]\s*:", args) if literal else []
        if keys:
            patterns += [re.compile(re.escape(prefix + k) + r"\Z") for k in keys]
        else:
            patterns.append(re.compile(re.escape(prefix) + r".+\Z"))
    return patterns


def source_of(page: Path, ref: str) -> Path:
    """The source of the page a glue reference names (executed chapters: their notebook)."""
    if not ref:
        return page
    target = (page.parent / ref).resolve()
    if target.parent.name == "executed":
        return ROOT / "notebooks" / (target.stem + ".md")
    return target.with_suffix(".md")


GLUE_PAGES = sorted(
    str(p.relative_to(ROOT))
    for p in [*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.md")]
    if "{glue" in p.read_text(encoding="utf-8")
)


def test_glued_keys_finds_calls_helpers_and_fstrings():
    code = (
        'glue("plain", 1, display=False)\n'
        'glue(f"beta_{key}", v)\n'
        'glue_numbers({"a": 1, "b": 2}, prefix="p_")\n'
        'glue_numbers({k: v for k, v in goal.items()}, prefix="count_")\n'
    )
    patterns = glued_keys(code)
    for key in ("plain", "beta_R", "p_a", "p_b", "count_anything"):
        assert any(p.match(key) for p in patterns), key
    assert not any(p.match("p_c") for p in patterns)
    assert used_glue_keys("{glue:text}`a:.2f` {glue:text}`x/y.ipynb::b:s` {glue}`c`") == [
        ("", "a"),
        ("x/y.ipynb", "b"),
        ("", "c"),
    ]


@pytest.mark.parametrize("page", GLUE_PAGES)
def test_every_glue_key_has_a_source(page):
    """A key no code glues would show nothing (or fail the build late): each key a page uses is
    glued by the page itself or by the page it names (``path::key``)."""
    path = ROOT / page
    missing = []
    for ref, key in used_glue_keys(path.read_text(encoding="utf-8")):
        source = source_of(path, ref)
        assert source.is_file(), f"{page} takes {key!r} from {ref}, which has no source page"
        if not any(p.match(key) for p in glued_keys(source.read_text(encoding="utf-8"))):
            missing.append(f"{ref}::{key}" if ref else key)
    assert not missing, f"{page} uses glue keys that no code glues: {missing}"


CHOICES_SOURCES = {
    "beta": "benchmarks/results/investigations/beta_readings.csv",
    "sdr": "benchmarks/results/investigations/sdr_standin.csv",
    "rk": "benchmarks/results/investigations/reweight_k.csv",
    "cwr": "benchmarks/results/investigations/cw_radius.csv",
    "mcmc": "benchmarks/results/investigations/sampler_settings.csv",
    "phcal": "benchmarks/results/investigations/table_ph_calibration.csv",
    "phdraw": "benchmarks/results/investigations/table_ph_draw.csv",
    "autoc": "benchmarks/results/investigations/table_auto_centring.csv",
    "catc": "benchmarks/results/investigations/table_categorical_clamp.csv",
    "nb01": "results/01_beta_censoring/summary.csv",
    "nb02": "results/02_sdr_censoring/summary.csv",
    "nb04": "results/04_reweighting/summary.csv",
    "nb05": "results/05_sdr_salary/summary.csv",
    "nb07": "results/07_modips_inference/summary.csv",
}
"""The choices page glues every row of these files under ``<prefix>_<quantity>``."""


def test_choices_page_quotes_only_quantities_its_files_hold():
    """The choices page glues whole files under a prefix, so the generic check above cannot
    tell a misspelt key: here each prefixed key must be a row of its file (or the file's
    date, or a summary's standard error)."""
    import csv

    text = (ROOT / "book" / "choices.md").read_text(encoding="utf-8")
    rows = {}
    for prefix, path in CHOICES_SOURCES.items():
        with open(ROOT / path, newline="", encoding="utf-8") as f:
            rows[prefix] = {row["quantity"] for row in csv.DictReader(f)}
    unknown = []
    for _, key in used_glue_keys(text):
        prefix, _, quantity = key.partition("_")
        if prefix not in rows:
            continue
        if quantity == "date" and CHOICES_SOURCES[prefix].startswith("benchmarks/"):
            continue
        if quantity not in rows[prefix] and quantity.removesuffix("_se") not in rows[prefix]:
            unknown.append(key)
    assert not unknown, f"book/choices.md quotes keys its files do not hold: {unknown}"


def test_book_sources_hold_no_control_characters():
    """A control character in a page's source (a vertical tab from an unescaped backslash in
    a generated edit, say) breaks MyST's line numbering: sphinx-exercise then misses a
    solution-end directive and the strict build fails. Only tabs and newlines are allowed."""
    bad = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
    pages = [*ROOT.glob("book/*.md"), *ROOT.glob("notebooks/*.md"), ROOT / "README.md"]
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in pages
        for n, line in enumerate(p.read_text(encoding="utf-8").split("\n"), start=1)
        if bad.search(line)
    ]
    assert not found, found
