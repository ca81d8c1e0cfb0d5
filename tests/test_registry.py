"""dpsynth.mechanisms.registry: one declaration per mechanism, and everything derived from it.

The rule the scan below enforces: **outside ``dpsynth/mechanisms/registry.py``, no literal tuple, list,
set or dict (its keys) in ``dpsynth/``, ``tools/``, ``book/_ext/`` or a book page's code
cells holds two or more of dpsynth's mechanism names** (``registry.NAMES``): which
mechanisms exist, which are DP, which options each takes, which runner makes it are facts
of the declarations, and a second list of them drifts. Prose, docstrings and the papers'
labels ("Censor_w", "PH") are not names and are not scanned. Two kinds of literal are
listed below, by file and the name of the definition that holds them:

* ``SELECTIONS``: which mechanisms a study, a plan or a book page chooses to run (a choice
  of that study, not a fact about the mechanisms);
* ``PENDING``: lists still to be derived (empty since the CLI and the curator read the
  registry); an entry must still be found, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.mechanisms import posterior, registry
from dpsynth.privacy import accounting, relations
from dpsynth.release import single
from dpsynth.release.single import KnownSeedWarning, RunnerOutput, synthesize

ROOT = Path(__file__).resolve().parents[1]

SELECTIONS = {
    ("dpsynth/release/settings.py", "CANDIDATES"),
    ("dpsynth/release/settings.py", "DEFAULT_CANDIDATES"),
    ("dpsynth/studies/real_data.py", "VARIANTS"),
    ("dpsynth/studies/real_data.py", "PAPER"),
    ("dpsynth/studies/real_data.py", "PROFILES"),
    ("book/utility_verdict.md", "<code cell>"),
    ("dpsynth/mechanisms/audit.py", "_RELEASES"),  # the audit's choice: the two Laplace releases
    ("dpsynth/mechanisms/audit.py", "audit_summary"),
    ("dpsynth/studies/real_data.py", "targets"),  # the count study's comparison
    ("tools/golden.py", "CASES"),  # the golden test's seeded cases, one per mechanism
    ("tools/golden.py", "case_plan"),  # the golden plan's candidates
}
PENDING: set[tuple[str, str]] = set()


def _contexts(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node's innermost enclosing function, or the module-level name it is assigned to."""
    out: dict[ast.AST, str] = {}

    def visit(node: ast.AST, context: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            context = node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign) and context.startswith("<"):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            context = names[0] if names else context
        out[node] = context
        for child in ast.iter_child_nodes(node):
            visit(child, context)

    visit(tree, "<module>")
    return out


def name_lists(source: str, where: str, default: str = "<module>") -> set[tuple[str, str]]:
    """(file, context) of every literal collection holding two or more mechanism names; the
    context is the enclosing definition's name, or ``default`` when it is not ``<module>``
    (a book page's code cells)."""
    tree = ast.parse(source)
    contexts = _contexts(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = [k for k in node.keys if k is not None]
        else:
            continue
        names = [e.value for e in elements if isinstance(e, ast.Constant)]
        if sum(n in registry.MECHANISMS for n in names if isinstance(n, str)) >= 2:
            context = contexts[node]
            found.add((where, context if default == "<module>" else default))
    return found


_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)


def _scan() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    files = [
        *ROOT.glob("dpsynth/**/*.py"),
        *ROOT.glob("tools/**/*.py"),
        *ROOT.glob("book/_ext/*.py"),
    ]
    for path in sorted(files):
        if path == ROOT / "dpsynth" / "mechanisms" / "registry.py":
            continue
        found |= name_lists(path.read_text(), str(path.relative_to(ROOT)))
    for page in sorted(ROOT.glob("book/*.md")):
        for cell in _CELL.finditer(page.read_text()):
            code = "\n".join(
                line for line in cell[1].splitlines() if not line.startswith((":", "%", "!"))
            )
            found |= name_lists(code, str(page.relative_to(ROOT)), "<code cell>")
    return found


def test_no_mechanism_name_list_outside_the_registry():
    found = _scan()
    unexpected = sorted(found - SELECTIONS - PENDING)
    assert unexpected == [], (
        f"mechanism names listed outside dpsynth/mechanisms/registry.py: {unexpected}"
    )
    gone = sorted(PENDING - found)
    assert gone == [], f"no longer found, remove from PENDING: {gone}"


def test_the_scan_finds_a_list_of_names():
    # the scan itself: a tuple, a set and dict keys of names are found, prose and one name not
    src = 'A = ("lw", "cw")\ndef f(m):\n    return m in {"ph", "sbs"}\nB = {"ph": 1, "sbs": 2}\n'
    assert name_lists(src, "x.py") == {("x.py", "A"), ("x.py", "f"), ("x.py", "B")}
    assert name_lists('T = "lw and cw"\nU = ("lw", "other")\n', "x.py") == set()


# ----------------------------------------------------------------------------- derivations


def test_the_library_constants_derive_from_the_declarations():
    assert single.ALL_MECHANISMS == registry.NAMES
    assert posterior.MECHANISMS == registry.POSTERIOR_NAMES
    assert posterior.GUARANTEE == {n: registry.get(n).guarantee for n in registry.POSTERIOR_NAMES}
    for m in registry.MECHANISMS.values():
        assert callable(m.release_runner()), m.name
        assert not m.fits_model or callable(m.fitter()), m.name
    assert set(registry.labels()) == set(registry.NAMES)
    assert accounting.NEIGHBOURS == relations.NEIGHBOURS


def test_every_declaration_is_complete():
    for name, m in registry.MECHANISMS.items():
        assert m.name == name and m.label and m.paper and m.summary, name
        assert m.guarantee in registry.GUARANTEE_KINDS, name
        assert set(m.neighbours) <= set(relations.NEIGHBOURS) and m.neighbours, name
        assert m.default_neighbours in m.neighbours, name
        assert set(m.outcomes) <= set(registry.COLUMN_TYPES), name
        assert (m.privacy_map is None) == (m.guarantee != "DP" or m.public_n), name


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 7.0])
def test_the_privacy_functions_are_the_declared_maps(epsilon):
    for name in registry.NAMES:
        m = registry.get(name)
        for nb in m.neighbours if m.bound_name == "censor_bound" else ():
            assert accounting.censor_bound(epsilon, nb) == m.internal_bound(epsilon, nb)
            assert accounting.epsilon_of(m.internal_bound(epsilon, nb), nb) == pytest.approx(
                epsilon
            )
    ph = registry.get("ph")
    for nb in relations.NEIGHBOURS:
        scale = ph.internal_bound(epsilon, nb)
        assert accounting.laplace_scale(
            accounting.histogram_sensitivity(nb), epsilon
        ) == pytest.approx(scale)
    assert accounting.censor_bound(4.0, "add-remove") == 2.0  # Eq. 3.5: M = eps / 2
    assert accounting.histogram_sensitivity("substitution") == 2.0


def test_a_declaration_refuses_a_relation_it_does_not_support():
    with pytest.raises(ValueError, match="supports neighbours substitution"):
        registry.get("sbs").internal_bound(1.0, "add-remove")
    with pytest.raises(ValueError, match="no a-priori privacy map"):
        registry.get("lw").internal_bound(1.0, "substitution")
    with pytest.raises(KeyError, match="choose one of unweighted"):
        registry.get("nope")


def test_the_studies_labels_are_the_registry_labels():
    from dpsynth.studies import censoring

    assert censoring.LABELS == registry.labels()
    assert censoring._label("censor-uw") == "Censor_uw (DP)"
    assert censoring._label("lw", 0.5) == "Weighted (aDP)\ndownscaled"


def test_the_cli_offers_the_registry_mechanisms():
    from dpsynth.cli.commands import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    synth = sub.choices["synthesize"]
    action = next(a for a in synth._actions if a.dest == "mechanism")
    assert tuple(action.choices) == registry.NAMES


def test_the_book_table_has_one_row_per_mechanism():
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from mechanism_table import mechanism_table
    finally:
        sys.path.pop(0)
    table = mechanism_table(["mechanism", "guarantee"])
    body = table.traverse(lambda n: n.tagname == "tbody")[0]
    rows = [[e.astext() for e in row.children] for row in body.children]
    assert rows == [[n, registry.get(n).guarantee] for n in registry.NAMES]
    with pytest.raises(ValueError, match="unknown columns"):
        mechanism_table(["mechanism", "colour"])


# ----------------------------------------------------------------------------- a new mechanism


def _dummy_runner(req: single.Request, ledger: accounting.BudgetLedger) -> RunnerOutput:
    """A data-independent mechanism: uniform draws on the public bounds (0-DP in truth)."""
    rng = np.random.default_rng(req.seed)
    n = req.n_synthetic if req.n_synthetic is not None else len(req.y)
    lo, hi = req.bounds
    sets = rng.uniform(lo, hi, size=(req.m, n))
    for j in range(1, req.m + 1):
        ledger.spend(f"synthetic set {j}/{req.m}: dummy", req.eps_set, "all records")
    report = {"mechanism": req.mechanism, "model": None, "knob": req.tuning.get("knob")}
    return RunnerOutput(single.synthetic_frame(sets, req.column, False), report, {})


@pytest.fixture
def dummy(monkeypatch):
    """One declaration and one function: the whole of a new mechanism."""
    spec = registry.Mechanism(
        name="dummy", label="Dummy", paper="none", guarantee="none",
        neighbours=("add-remove",), options=frozenset({"knob"}), outcomes=("continuous",),
        runner=f"{__name__}:_dummy_runner", default_neighbours="add-remove",
        summary="uniform on the public bounds",
    )  # fmt: skip
    monkeypatch.setitem(registry.MECHANISMS, "dummy", spec)
    return spec


def test_a_new_mechanism_is_one_declaration_and_one_function(dummy):
    y = np.linspace(0.05, 0.95, 40)
    with pytest.warns(KnownSeedWarning):
        rel = synthesize(
            y, mechanism="dummy", epsilon=1.0, m=2, bounds=(0.0, 1.0), n_synthetic=30,
            seed=7, knob=3,
        )  # fmt: skip
    assert rel.report["mechanism"] == "dummy" and rel.report["knob"] == 3
    assert rel.report["neighbours"] == "add-remove"  # its declared default relation
    assert rel.report["ledger"]["spent"] == pytest.approx(1.0)
    assert rel.data.shape == (60, 2) and rel.data["y"].between(0.0, 1.0).all()
    assert "utility" in rel.diagnostics and rel.diagnostics["seed"] == 7
    assert [e["epsilon"] for e in rel.report["ledger"]["spends"]] == [0.5, 0.5]


def test_a_new_mechanism_is_validated_by_its_declaration(dummy):
    y = np.linspace(0.05, 0.95, 40)
    with pytest.raises(InputError, match="n_synthetic"):  # add-remove by default: n private
        synthesize(y, mechanism="dummy", epsilon=1.0, bounds=(0.0, 1.0))
    with pytest.raises(InputError, match="does not apply to the dummy mechanism") as exc:
        synthesize(y, mechanism="dummy", epsilon=1.0, bounds=(0.0, 1.0), n_synthetic=5, c=2.0)
    assert exc.value.param == "c"
    with pytest.raises(InputError, match="reference"):
        synthesize(
            y, mechanism="dummy", epsilon=1.0, bounds=(0.0, 1.0), n_synthetic=5,
            reference=pd.Series(y),
        )  # fmt: skip


def test_an_undeclared_mechanism_is_refused_naming_the_choices():
    with pytest.raises(InputError, match="mechanism") as exc:
        synthesize(np.linspace(0.1, 0.9, 10), mechanism="dummy", epsilon=1.0)
    assert "censor-uw" in str(exc.value)


def test_the_release_default_relation_is_the_declared_one():
    assert all(
        m.default_neighbours == relations.DEFAULT_NEIGHBOURS for m in registry.MECHANISMS.values()
    )
    y = np.linspace(0.05, 0.95, 40)
    with pytest.warns(KnownSeedWarning):
        rel = synthesize(y, mechanism="ph", epsilon=1.0, bounds=(0.0, 1.0), seed=3)
    assert rel.report["neighbours"] == relations.DEFAULT_NEIGHBOURS
