"""Generated hostile input on every surface (issue 53): table specs, pieces files, input
files and command lines, made by Hypothesis.

Properties: every run exits 0 or 2, never with a traceback; a refusal is one line naming the
parameter, writes nothing and leaves the input untouched; no value of the confidential data
reaches the terminal or a public file outside a CONFIDENTIAL banner; a released file lies
within its spec's bounds and levels. Stan is switched off (:func:`fuzz_common.no_stan`): a
run that would fit a model has passed every check made before the fit, and is counted as such.
Releases that must succeed use PH (a histogram, no fit). Profiles and reruns:
``tests/fuzz_common.py`` and the book page "Faults and fuzzing".
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fuzz_common import (
    assert_contract,
    examples,
    leaked,
    public_text,
    refusal_line,
    run_cli,
    snapshot,
    tally,
)
from hypothesis import example, given
from hypothesis import strategies as st

from dpsynth.errors import InputError
from dpsynth.models.pieces import Pieces, parse_pieces
from dpsynth.table.spec import TableSpec, load_spec

ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------- values


def mostly(valid: Any, hostile: Any) -> Any:
    """A strategy that draws from ``hostile`` one time in eight, else from ``valid``."""
    return st.integers(0, 7).flatmap(lambda i: hostile if i == 0 else valid)


TEXT = st.text(max_size=12)
ODD_TEXT = st.sampled_from(
    ["", " ", "é", "名前", "a\nb", 'q"uote', "tab\t", "\x00", "🙂", "<missing>"]
)
NUMBER = st.one_of(
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1e308, -1e308, 5e-324]),
)
ANY_VALUE = st.one_of(
    NUMBER, TEXT, ODD_TEXT, st.booleans(), st.lists(NUMBER | TEXT, max_size=4), st.just({})
)

# ----------------------------------------------------------------------------- table specs

NAMES = mostly(st.sampled_from(["a", "b", "c", "g", "y", "é", "a b"]), ODD_TEXT)
TYPES = mostly(st.sampled_from(["continuous", "count", "binary", "categorical"]), TEXT)
MECHANISMS = st.sampled_from(["ph"] * 12 + ["censor-uw", "censor-w", "lw", "bogus"])
MODELS = st.sampled_from(
    ["beta-regression", "lognormal-regression", "poisson", "negbin", "logistic", "categorical"]
)
BOUNDS = st.lists(NUMBER, min_size=0, max_size=3) | st.tuples(NUMBER, NUMBER).map(list) | ANY_VALUE
LEVELS = st.lists(TEXT | ODD_TEXT | st.integers(-5, 5) | st.booleans(), max_size=5) | ANY_VALUE
OPTIONS = {
    "share": NUMBER | ANY_VALUE,
    "missing": st.sampled_from(["refuse", "indicator", "level"]) | ANY_VALUE,
    "clip": st.booleans() | ANY_VALUE,
    "given": st.lists(NAMES, max_size=3) | ANY_VALUE,
    "given_bins": st.integers(-3, 2000) | ANY_VALUE,
    "bins": st.integers(-3, 2000) | ANY_VALUE,
    "calibrate_share": NUMBER | ANY_VALUE,
    "centring": st.sampled_from(["none", "marginal", "auto", "reference"]) | ANY_VALUE,
    "design": st.sampled_from(["one-hot", "number", "linear", "quadratic"]) | ANY_VALUE,
    "downscale": NUMBER | st.just("auto") | ANY_VALUE,
    "debias": st.booleans() | ANY_VALUE,
    "clamp": st.sampled_from(["hard", "smooth"]) | ANY_VALUE,
    "model": MODELS | ANY_VALUE,
    "unknown_key": ANY_VALUE,
}


@st.composite
def column_entries(draw: Any, confidential: bool) -> dict[str, Any]:
    """One [[public]] or [[confidential]] entry: mostly well-formed, sometimes not at all."""
    entry: dict[str, Any] = {"name": draw(NAMES)}
    kind = draw(TYPES)
    entry["type"] = kind
    if kind in ("binary", "categorical") or draw(st.integers(0, 9)) == 0:
        entry["levels"] = draw(mostly(
            st.lists(st.sampled_from(["x", "y", "z", "é", "名", "1", "2"]), min_size=2, max_size=4, unique=True),
            LEVELS))  # fmt: skip
    if kind in ("continuous", "count") or draw(st.integers(0, 9)) == 0:
        lo, hi = draw(st.integers(-10, 10)), draw(st.integers(-10, 110))
        entry["bounds"] = draw(mostly(st.just([lo, hi]) | st.just(sorted([lo, hi])), BOUNDS))
    if confidential:
        entry["mechanism"] = draw(MECHANISMS)
        if draw(st.integers(0, 2)) == 0:
            for key in draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=2, unique=True)):
                entry[key] = draw(OPTIONS[key])
    if draw(st.integers(0, 9)) == 0:
        del entry["name"]
    return entry


@st.composite
def specs(draw: Any) -> dict[str, Any]:
    """A table spec mapping: columns of any type, levels of any text, bounds in any order,
    shares, options of the wrong type, unknown keys, duplicate and cyclic columns."""
    raw: dict[str, Any] = {
        "public": draw(st.lists(column_entries(False), max_size=2)),
        "confidential": draw(st.lists(column_entries(True), min_size=1, max_size=3)),
    }
    top = st.lists(st.sampled_from(["neighbours", "fit_records", "clip", "bogus"]), max_size=2)
    for key in draw(mostly(st.just([]), top)):
        raw[key] = draw(ANY_VALUE | st.sampled_from(["substitution", "add-remove", "all", 100]))  # fmt: skip
    if draw(st.integers(0, 7)):  # distinct names, mostly
        for i, entry in enumerate(raw["public"] + raw["confidential"]):
            if "name" in entry:
                entry["name"] = f"c{i}"
    if draw(st.integers(0, 9)) == 0:
        raw["confidential"] = draw(ANY_VALUE)
    conf = raw["confidential"]
    tables = isinstance(conf, list) and all(isinstance(e, dict) for e in conf)
    if draw(st.integers(0, 5)) == 0 and tables and len(conf) >= 2:  # cyclic given
        a, b = raw["confidential"][:2]
        a["given"], b["given"] = [b.get("name", "")], [a.get("name", "")]
    return raw


LEVEL_TEXT = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=5)


@st.composite
def ph_specs(draw: Any) -> dict[str, Any]:
    """A spec a table release may accept without a Stan fit: PH columns (levels of any letters
    or digits, bounds in any order, any shares), a public column, sometimes a hostile key."""
    conf = []
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["categorical", "binary"] + ["continuous"] * (i == 0)))
        entry: dict[str, Any] = {"name": f"c{i}", "type": kind, "mechanism": "ph"}
        entry["share"] = draw(mostly(st.floats(0.1, 5), NUMBER))
        if kind == "continuous":
            entry["bounds"] = [draw(st.integers(-50, 50)), draw(st.integers(-50, 150))]
        else:
            size = 2 if kind == "binary" else draw(st.integers(2, 4))
            entry["levels"] = draw(st.lists(LEVEL_TEXT, min_size=size, max_size=size, unique=True))
        if draw(st.integers(0, 7)) == 0:
            key = draw(st.sampled_from(sorted(OPTIONS)))
            entry[key] = draw(OPTIONS[key])
        conf.append(entry)
    public = [{"name": "p", "type": "continuous", "bounds": [0, 1]}] * draw(st.integers(0, 1))
    return {"public": public, "confidential": conf}


def toml_value(value: Any) -> str:
    """A value as TOML (JSON's escapes are TOML's; nan and inf are TOML words)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{_toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise TypeError(value)


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes, but astral characters written as themselves
    (JSON's surrogate pairs are not TOML) and DEL escaped (TOML forbids it raw)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def to_toml(raw: dict[str, Any]) -> str:
    """A spec mapping as TOML text ([[public]] and [[confidential]] as arrays of tables)."""
    lines = []
    for key, value in raw.items():
        if not _tables_of(raw, key):
            lines.append(f"{_toml_string(key)} = {toml_value(value)}")
    for key in ("public", "confidential"):
        if _tables_of(raw, key):
            for entry in raw[key]:
                lines.append(f"[[{key}]]")
                lines += [f"{_toml_string(k)} = {toml_value(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


def _tables_of(raw: dict[str, Any], key: str) -> bool:
    """Whether ``raw[key]`` is written as [[key]] tables (a list of mappings)."""
    value = raw.get(key)
    is_list = key in ("public", "confidential") and isinstance(value, list)
    return is_list and all(isinstance(e, dict) for e in value)


def _parsed(raw: Any) -> TableSpec | InputError:
    try:
        return load_spec(raw)
    except InputError as exc:
        return exc


def _assert_one_line_error(exc: InputError) -> None:
    text = str(exc)
    assert "\n" not in text and "\r" not in text, f"a refusal on two lines: {text!r}"
    assert text.startswith(f"{exc.param}: ") and exc.param


@examples(300)
@given(specs())
@example(
    {"confidential": [{"name": "a", "type": "binary", "mechanism": "ph", "levels": ["x\ny", "z"]}]}
)
@example(
    {"confidential": [{"name": "a", "mechanism": "ph", "type": "continuous", "bounds": [1, 0]}]}
)
@example({"confidential": [{"name": "a", "type": "categorical", "mechanism": "ph", "levels": ["x", "y"]},
                           {"name": "a", "type": "binary", "mechanism": "ph"}]})  # fmt: skip
def test_spec_mapping_is_parsed_or_refused_in_one_line(raw):
    """A spec mapping: a TableSpec, or one InputError naming its key (never another error)."""
    got = _parsed(raw)
    if isinstance(got, InputError):
        _assert_one_line_error(got)
        tally("spec mapping", f"refused: {got.param}")
        return
    assert got.confidential, "a spec without a confidential column was accepted"
    for col in got.confidential:
        assert col.share > 0 and math.isfinite(col.share)
        if col.bounds is not None:
            assert col.bounds[0] < col.bounds[1]
        if col.levels is not None:
            assert len({str(v) for v in col.levels}) == len(col.levels) >= 2
    tally("spec mapping", "accepted")


@examples(150)
@given(
    st.one_of(specs().map(to_toml), st.text(max_size=200), st.binary(max_size=200))
    | ph_specs().map(to_toml)
)
@example(b"\xff\xfe[[confidential]]")
@example('[[confidential]]\nname = "a"\n[[confidential]]\nname = "a"\n')
@example(  # two shares near the largest float: their sum overflowed (found by the long profile)
    '[[confidential]]\nname = "a"\ntype = "binary"\nmechanism = "ph"\nshare = 1e308\n'
    'levels = ["x", "y"]\n[[confidential]]\nname = "b"\ntype = "binary"\nmechanism = "ph"\n'
    'share = 1e308\nlevels = ["x", "y"]\n'
)
def test_spec_file_is_parsed_or_refused_in_one_line(text):
    """A spec file of any bytes: parsed, or refused in one line naming a key or ``spec``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.toml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        before = path.read_bytes()
        got = _parsed(path)
        assert path.read_bytes() == before
    if isinstance(got, InputError):
        _assert_one_line_error(got)
    tally("spec file", "refused" if isinstance(got, InputError) else "accepted")


# ----------------------------------------------------------------------------- table releases


def _cell(col: Any, draw: Any, outside: bool) -> str:
    """A value of ``col`` (a spec column) as CSV text; ``outside`` its public range."""
    if col.levels is not None:
        return "not-a-level" if outside else str(draw(st.sampled_from(col.levels)))
    lo, hi = col.bounds if col.bounds is not None else (0.0, 1.0)
    if outside:
        return repr(hi + 1.0 + abs(hi))
    if col.type == "count":
        return str(draw(st.integers(math.ceil(lo), math.floor(hi))) if math.ceil(lo) <= hi else lo)
    return repr(draw(st.floats(lo, hi)))


def _released_within_spec(out: Path, spec: TableSpec) -> None:
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    for col in spec.confidential:
        assert col.name in frame.columns
        values = frame[col.name]
        if col.levels is not None:
            allowed = {str(v) for v in col.levels} | ({""} if col.missing != "refuse" else set())
            assert set(values) <= allowed, f"{col.name}: {set(values) - allowed}"
        else:
            nums = pd.to_numeric(values)
            assert nums.between(*col.bounds).all(), f"{col.name} outside {col.bounds}"


def _ph_only(spec: TableSpec) -> bool:
    return all(c.mechanism == "ph" for c in spec.order())


def _table_run(raw: dict[str, Any], spec: TableSpec, draw: Any, outside: bool) -> str:
    """synthesize-table on ``raw`` and 40 records drawn within (or, ``outside``, one outside)
    the spec's public bounds and levels; checks the contract and the released file."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "spec.toml").write_text(to_toml(raw), encoding="utf-8")
        columns = [*spec.public, *spec.confidential]
        rows = [[_cell(c, draw, outside and i == 3) for c in columns] for i in range(40)]
        pd.DataFrame(rows, columns=[c.name for c in columns]).to_csv(work / "data.csv", index=False)
        before = snapshot(work)
        run = run_cli(
            ["synthesize-table", "data.csv", "--spec", "spec.toml", "--epsilon", "2", "--out",
             "out.csv", "--report", "report.json", "--quiet", "--skip-preflight"], work)  # fmt: skip
        outcome = assert_contract(run, before, snapshot(work), ["data.csv", "spec.toml"])
        if run.code == 0:
            _released_within_spec(work / "out.csv", spec)
            assert json.loads((work / "report.json").read_text())["confidential_columns"]
        return outcome


@examples(40)
@given(ph_specs(), st.data())
def test_table_release_from_a_generated_spec(raw, data):
    """synthesize-table on a generated spec and matching (or not) data: exit 0 or 2, a refusal
    in one line with nothing written, and a release within the spec's bounds and levels. Only
    specs whose columns are all PH are released here (a model column needs a Stan fit)."""
    got = _parsed(raw)
    if isinstance(got, InputError):
        tally("table release", f"spec refused: {got.param} (not run)")
        return
    assert _ph_only(got)
    outside = data.draw(st.integers(0, 5)) == 0
    tally("table release", _table_run(raw, got, data.draw, outside))


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_table_release_of_unicode_levels():
    """A regression example kept by hand: unicode levels, two PH columns, one given the other."""
    raw = {
        "confidential": [
            {"name": "g", "type": "categorical", "mechanism": "ph", "levels": ["x", "é", "名"]},
            {"name": "h", "type": "binary", "mechanism": "ph", "levels": ["0", "1"]},
        ]
    }
    spec = load_spec(raw)
    assert _table_run(raw, spec, lambda s: s.example(), False) == "released (0)"


# ----------------------------------------------------------------------------- pieces

GOOD_PIECES = sorted((ROOT / "dpsynth" / "stan" / "examples" / "pieces").glob("*.pieces"))
FRAGMENTS = st.sampled_from(
    [
        "functions {", "}", "{", "parameters { real mu; real<lower=0> sigma; }",
        "prior { mu ~ normal(0, 1); sigma ~ exponential(1); }",
        "real record_lpdf(real y, row_vector x, real mu, real sigma) { return normal_lpdf(y | mu, sigma); }",
        "int record_lpmf(int y, row_vector x, real mu) { return 0; }",
        "real record_rng(row_vector x, real mu, real sigma) { return normal_rng(mu, sigma); }",
        "// a comment }", "/* a { comment */", "/* unclosed", '"a string { with brace"', "print(mu);",
        "reject(\"x\");", "fatal_error(\"x\");", "#include other.stan", "dpsynth_y", "target += 1;",
        "real f_lp(real a) { return a; }", "data { int n; }", "model { }", "generated quantities { }",
        "transformed parameters { real tau = 2 * sigma; }", "é", "名前", "🙂", "\x00", "\n", " ",
    ]
)  # fmt: skip


SHIPPED = sorted(p.read_text(encoding="utf-8") for p in GOOD_PIECES)


@st.composite
def mutated_pieces(draw: Any) -> str:
    """A shipped pieces file with fragments inserted at, or slices cut from, random places."""
    text = draw(st.sampled_from(SHIPPED))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + draw(FRAGMENTS | st.text(max_size=6)) + text[at:]
        else:
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
    return text


@examples(300)
@given(mutated_pieces() | st.lists(FRAGMENTS | st.text(max_size=10), max_size=12).map(" ".join))
@example("functions {} parameters { real mu; } prior { } block\nwith newline { }")
@example("functions { real record_lpdf(real y) { return 0; } real record_rng() { return 0; } } "
         "parameters { } prior { }")  # fmt: skip
def test_pieces_are_parsed_or_refused_naming_pieces(text):
    """Any text as a pieces file: Pieces, or InputError("pieces") in one line."""
    try:
        got = parse_pieces(text)
    except InputError as exc:
        assert exc.param == "pieces"
        _assert_one_line_error(exc)
        tally("pieces text", "refused: pieces")
        return
    assert isinstance(got, Pieces) and got.parameter_names
    assert got.outcome in ("real", "count")
    tally("pieces text", "parsed (stanc checks names next)")


def test_the_shipped_pieces_parse():
    """The generator's well-formed fragments come from files that do parse (a control)."""
    assert GOOD_PIECES
    for path in GOOD_PIECES:
        assert parse_pieces(path.read_text(encoding="utf-8")).parameter_names


# ----------------------------------------------------------------------------- input files

SECRET_TEXT = "S3CR3T"


@st.composite
def cells(draw: Any, clean: bool) -> tuple[str, str | None]:
    """One CSV cell and the secret it holds (a value the terminal must never show); a
    ``clean`` cell is one in [1, 100) mostly (one in 40 not)."""
    kind = draw(st.integers(0, 9)) if not clean or draw(st.integers(0, 39)) == 0 else 0
    if kind <= 4:  # an in-range value with many digits: unmistakable if printed
        v = draw(st.integers(1, 99)) + draw(st.integers(100001, 999999)) / 1e6
        return f"{v:.6f}", f"{v:.6f}"
    if kind == 5:
        return draw(
            st.sampled_from(["nan", "NaN", "inf", "-inf", "", "NA", "1e308", "-1e309"])
        ), None
    if kind == 6:
        secret = f"{SECRET_TEXT}{draw(st.integers(0, 999))}"
        return secret, secret
    if kind == 7:
        return draw(st.sampled_from(["é", "名前", "1,5", '"q""', "0x10", "١٢"])), None
    if kind == 8:
        return str(draw(st.integers(-(10**30), 10**30))), None
    return repr(draw(st.floats(allow_nan=False, allow_infinity=False))), None


@st.composite
def input_files(draw: Any) -> tuple[bytes, list[str]]:
    """A CSV file's bytes (any header, duplicates, empty, mixed encodings) and its secrets."""
    header = draw(
        st.sampled_from([["y"], ["y", "g"], ["y", "y"], ["g", "y", ""], [" y "], ["y;g"], []])
        | st.lists(NAMES, max_size=3)
    )  # fmt: skip
    n = draw(mostly(st.integers(1, 30), st.integers(0, 30)))
    clean = draw(st.booleans())
    if clean and draw(st.integers(0, 3)):
        header = ["y", "g"][: draw(st.integers(1, 2))]
    rows, secrets = [], []
    for _ in range(n):
        row = []
        for _ in range(max(len(header), 1)):
            text, secret = draw(cells(clean))
            row.append(text)
            if secret:
                secrets.append(secret)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=header if header and len(rows) else None)
    text = ",".join(header) + "\n" + "\n".join(",".join(r) for r in rows) if header else ""
    if draw(st.integers(0, 5)) == 0:
        text = frame.to_csv(index=False) if len(frame.columns) else text
    encoding = draw(
        mostly(st.just("utf-8"), st.sampled_from(["utf-8-sig", "latin-1", "utf-16", "cp1252"]))
    )
    data = text.encode(encoding, errors="replace")
    if draw(st.integers(0, 9)) == 0:
        data += "\né".encode("latin-1")  # mixed encodings in one file
    if draw(st.integers(0, 19)) == 0:
        data = b"PAR1\x15\x04\x15\x00PAR1"  # a Parquet file named .csv
    return data, secrets


FLAG_EXTRAS = st.lists(
    st.sampled_from(
        [["--clip-to-bounds"], ["--drop-missing", "--n-synthetic", "50"], ["--integer"], ["--m", "2"],
         ["--n-bins", "7"], ["--consistency", "simplex"], ["--draw", "systematic"], ["--mechanism", "sbs"],
         ["--bounds", "100", "0"], ["--bounds", "0", "inf"], ["--epsilon", "nan"], ["--epsilon", "25"],
         ["--diagnostics", "diag.json"], ["--budget-file", "budget.jsonl", "--budget-total", "9"],
         ["--neighbours", "add-remove"], ["--n-synthetic", "10"]]
    ),
    max_size=3,
).map(lambda parts: [a for p in parts for a in p])  # fmt: skip


def _check_release_file(work: Path, argv: list[str]) -> None:
    """A released single column lies within --bounds (PH: integers with --integer)."""
    out = pd.read_csv(work / "out.csv")
    assert len(out) > 0 and "y" in out.columns
    lo, hi = (
        (float(argv[i + 1]), float(argv[i + 2]))
        if (i := _last(argv, "--bounds")) >= 0
        else (0, 100)
    )
    assert out["y"].between(lo, hi).all() and out["y"].notna().all()
    if "--integer" in argv and "sbs" not in argv:
        assert (out["y"] == out["y"].round()).all()


def _last(argv: list[str], flag: str) -> int:
    return max((i for i, a in enumerate(argv) if a == flag), default=-1)


@examples(120)
@given(input_files(), FLAG_EXTRAS)
@example((b"y\n1.5\n", []), ["--drop-missing", "--n-synthetic", "50"])
@example((b"y,y\n1,2\n", []), [])
@example((("y\n" + "S3CR3T7\n" * 3).encode(), ["S3CR3T7"]), ["--clip-to-bounds"])
def test_single_column_release_from_a_generated_file(file, extra):
    """synthesize --mechanism ph (or sbs) on any file: the contract, no secret outside a
    banner, and a released file within --bounds."""
    data, secrets = file
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "in.csv").write_bytes(data)
        before = snapshot(work)
        argv = ["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--bounds", "0", "100",
                "--epsilon", "1", "--out", "out.csv", "--report", "report.json", *extra]  # fmt: skip
        run = run_cli(argv, work)
        outcome = assert_contract(run, before, snapshot(work), ["in.csv"], ledger="budget.jsonl")
        assert not leaked(public_text(run.err) + run.out, secrets), run.err
        if run.code == 0:
            _check_release_file(work, argv)
            assert not leaked((work / "report.json").read_text(), secrets)
            assert not leaked((work / "out.csv").read_text(), secrets)
    tally("input file", outcome)


@st.composite
def parquet_files(draw: Any) -> tuple[bytes, list[str]]:
    """A Parquet file's bytes (pyarrow): columns of any type (text, booleans, huge integers,
    NaN and infinities), duplicated or missing names, no rows, or the file cut short."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    n = draw(mostly(st.integers(1, 30), st.just(0)))
    secrets = []
    values = [float(f"{draw(st.integers(1, 99)) + draw(st.integers(100001, 999999)) / 1e6:.6f}")
              for _ in range(n)]  # fmt: skip
    secrets += [f"{v:.6f}" for v in values]
    kind = draw(st.sampled_from(["float", "float", "text", "bool", "int", "nonfinite", "null"]))
    if kind == "text":
        column = pa.array([f"{SECRET_TEXT}{i}" for i in range(n)])
        secrets += [f"{SECRET_TEXT}{i}" for i in range(n)]
    elif kind == "bool":
        column = pa.array([bool(i % 2) for i in range(n)])
    elif kind == "int":
        column = pa.array([draw(st.integers(-(2**63), 2**63 - 1)) for _ in range(n)], pa.int64())
    elif kind == "nonfinite":
        column = pa.array(
            [draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, v])) for v in values]
        )
    elif kind == "null":
        column = pa.array([None if i % 3 == 0 else v for i, v in enumerate(values)], pa.float64())
    else:
        column = pa.array(values, pa.float64())
    names = draw(st.sampled_from([["y"], ["y", "g"], ["y", "y"], ["g"], [" y "], ["é", "y"]]))
    arrays = [column if name.strip() == "y" else pa.array(["a"] * n) for name in names]
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, names=names), buffer)
    data = buffer.getvalue()
    if draw(st.integers(0, 9)) == 0:
        data = data[: draw(st.integers(0, len(data) - 1))]  # cut short
    return data, secrets


@examples(60)
@given(parquet_files(), FLAG_EXTRAS)
def test_single_column_release_from_a_generated_parquet_file(file, extra):
    """The same contract for a Parquet input (read by its extension): exit 0 or 2, one line,
    nothing written on refusal, no secret outside a banner, a release within --bounds."""
    data, secrets = file
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "in.parquet").write_bytes(data)
        before = snapshot(work)
        argv = ["synthesize", "in.parquet", "--column", "y", "--mechanism", "ph", "--bounds", "0",
                "100", "--epsilon", "1", "--out", "out.csv", "--report", "report.json", *extra]  # fmt: skip
        run = run_cli(argv, work)
        outcome = assert_contract(
            run, before, snapshot(work), ["in.parquet"], ledger="budget.jsonl"
        )
        assert not leaked(public_text(run.err) + run.out, secrets), run.err
        if run.code == 0:
            _check_release_file(work, argv)
            assert not leaked((work / "report.json").read_text(), secrets)
    tally("Parquet input file", outcome)


# ----------------------------------------------------------------------------- command lines

FLAGS = [
    "--column", "--model", "--pieces", "--stan-file", "--mechanism", "--epsilon", "--bounds",
    "--out", "--report", "--diagnostics", "--budget-file", "--budget-total", "--m", "--seed",
    "--n-synthetic", "--neighbours", "--covariates", "--categorical", "--weights-from",
    "--centring-from", "--n-bins", "--chains", "--iter-warmup", "--adapt-delta", "--spec",
    "--json", "--rule", "--estimand", "--quiet", "--integer", "--drop-missing", "--bogus", "-h",
]  # fmt: skip
VALUES = st.sampled_from(
    ["in.csv", "out.csv", "report.json", "missing.csv", ".", "in.csv", "y", "g", "ph", "sbs",
     "censor-uw", "beta", "1", "0", "-1", "nan", "inf", "1e308", "2.5", "100", "é", "", "--",
     "spec.toml", "budget.jsonl", "good.pieces", "substitution", "add-remove", "mean", "20000"]
) | TEXT  # fmt: skip
COMMANDS = st.sampled_from(
    ["synthesize", "plan", "combine", "synthesize-table", "plan-table", "bogus", "--version"]
)


VALID_ARGVS = [
    ["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--bounds", "0", "100",
     "--epsilon", "1", "--out", "out.csv", "--report", "report.json"],
    ["synthesize", "in.csv", "--column", "y", "--model", "beta", "--mechanism", "censor-uw",
     "--bounds", "0", "100", "--epsilon", "1", "--out", "out.csv", "--report", "report.json"],
    ["synthesize-table", "in.csv", "--spec", "spec.toml", "--epsilon", "1", "--out", "out.csv",
     "--report", "report.json", "--budget-file", "budget.jsonl", "--budget-total", "3"],
    ["synthesize", "in.csv", "--column", "y", "--pieces", "good.pieces", "--bounds", "0", "100",
     "--epsilon", "1", "--out", "out.csv", "--report", "report.json"],
    ["combine", "in.csv", "--column", "y", "--estimand", "mean", "--rule", "single"],
]  # fmt: skip


@st.composite
def mutated_argvs(draw: Any) -> list[str]:
    """A valid command line with a few words replaced, removed or added."""
    argv = list(draw(st.sampled_from(VALID_ARGVS)))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(1, len(argv)))
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        word = draw(VALUES | st.sampled_from(FLAGS))
        if action == "replace" and at < len(argv):
            argv[at] = word
        elif action == "remove" and at < len(argv):
            del argv[at]
        else:
            argv.insert(at, word)
    return argv


@st.composite
def argvs(draw: Any) -> list[str]:
    argv = [draw(COMMANDS)]
    if draw(st.integers(0, 4)):
        argv.append(draw(st.sampled_from(["in.csv", "missing.csv", "."])))
    for _ in range(draw(st.integers(0, 8))):
        argv.append(draw(st.sampled_from(FLAGS)))
        argv += [draw(VALUES) for _ in range(draw(st.integers(0, 2)))]
    return argv


def _cli_folder(work: Path) -> None:
    rows = "\n".join(f"{10 + i * 0.7345671:.7f},{'ab'[i % 2]}" for i in range(60))
    (work / "in.csv").write_text(f"y,g\n{rows}\n", encoding="utf-8")
    (work / "spec.toml").write_text(
        '[[confidential]]\nname = "g"\ntype = "binary"\nlevels = ["a", "b"]\nmechanism = "ph"\n'
    )
    shipped = next((ROOT / "dpsynth" / "stan" / "examples" / "pieces").glob("*.pieces"))
    (work / "good.pieces").write_text(shipped.read_text())


@examples(250)
@given(argvs() | mutated_argvs())
@example(
    [
        "synthesize",
        "",
        "--column",
        "y",
        "--mechanism",
        "ph",
        "--bounds",
        "0",
        "100",
        "--epsilon",
        "1",
        "--out",
        "out.csv",
        "--report",
        "report.json",
    ]
)  # an empty path: was
# "IN.csv:  is a directory" (Path("") is the working folder)
@example(["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--bounds", "0", "100",
          "--epsilon", "1", "--out", "", "--report", "report.json"])  # fmt: skip
@example(["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--bounds", "0", "100",
          "--epsilon", "1", "--out", "in.csv", "--report", "report.json"])  # fmt: skip
@example(["synthesize-table", "in.csv", "--spec", "spec.toml", "--epsilon", "1", "--out", "out.csv",
          "--report", "report.json", "--budget-total", "3"])  # fmt: skip
def test_any_command_line(argv):
    """Any argument vector: exit 0 or 2 (or every check passed before a Stan fit), a refusal
    in one line naming the flag with nothing written, the input untouched, and no record value
    on the terminal outside a banner."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _cli_folder(work)
        before = snapshot(work)
        run = run_cli(argv, work)
        outcome = assert_contract(
            run, before, snapshot(work), ["in.csv", "spec.toml"], "budget.jsonl"
        )
        secrets = [t.split(",")[0] for t in (work / "in.csv").read_text().splitlines()[1:]]
        assert not leaked(public_text(run.err), secrets), run.err
    tally("command line", outcome)


# ----------------------------------------------------------------------------- end to end

SUBPROCESS_CASES = [
    (["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--bounds", "0", "100",
      "--epsilon", "1", "--out", "out.csv", "--report", "report.json"], 0),
    (["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--bounds", "100", "0",
      "--epsilon", "1", "--out", "out.csv", "--report", "report.json"], 2),
    (["synthesize", "in.csv", "--column", "é", "--epsilon", "nan", "--out", "o", "--report", "r"], 2),
    (["synthesize-table", "in.csv", "--spec", "spec.toml", "--epsilon", "1", "--out", "out.csv",
      "--report", "report.json"], 0),
    (["synthesize-table", "in.csv", "--spec", "in.csv", "--epsilon", "1", "--out", "out.csv",
      "--report", "report.json"], 2),
    (["combine", "in.csv", "--column", "y", "--estimand", "bogus"], 2),
    (["--bogus"], 2),
]  # fmt: skip


def test_end_to_end_no_traceback(tmp_path):
    """A few runs of ``python -m dpsynth`` in a fresh process: the expected exit status, a
    refusal in one line, never a traceback (what the in-process runs cannot see: imports,
    the entry point, stdout flushing)."""
    _cli_folder(tmp_path)
    for argv, expected in SUBPROCESS_CASES:
        before = snapshot(tmp_path)
        done = subprocess.run(  # the same dpsynth as this test's

            [sys.executable, "-m", "dpsynth", *argv, "--quiet"] if argv[0] != "--bogus" else
            [sys.executable, "-m", "dpsynth", *argv],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert "Traceback" not in done.stderr + done.stdout, done.stderr
        assert done.returncode == expected, (argv, done.stderr)
        if expected == 2:
            refusal_line(done.stderr)
            assert snapshot(tmp_path) == before
        for name in ("out.csv", "report.json"):
            (tmp_path / name).unlink(missing_ok=True)
        tally("end to end (subprocess)", f"exit {done.returncode}")


def test_a_level_read_as_missing_is_refused_up_front():
    """Found by the table-release property: a spec level "NULL" was accepted, and then every
    record holding it was refused as a missing value (the CSV reader's NA texts)."""
    from pandas._libs.parsers import STR_NA_VALUES

    from dpsynth.table.spec import READ_AS_MISSING

    assert READ_AS_MISSING == STR_NA_VALUES
    for level in ("NULL", "NA", "nan", ""):
        raw = {
            "confidential": [
                {"name": "g", "type": "binary", "mechanism": "ph", "levels": [level, "x"]}
            ]
        }
        got = _parsed(raw)
        assert isinstance(got, InputError) and got.param == "levels", level
    assert isinstance(_parsed({"confidential": [{"name": "g", "type": "binary", "mechanism": "ph",
                                                 "levels": ["NULLS", "x"]}]}), TableSpec)  # fmt: skip
