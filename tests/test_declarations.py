"""Declarations carry behaviour: the library asks a mechanism's declaration
(:mod:`dpsynth.mechanisms.registry`) what it can do, never its name.

A comparison with a mechanism's name (``mechanism == "ph"``, ``m in ("censor-w", ...)``,
``m.startswith("censor")``) outside the registry is an if-chain waiting to miss the next
mechanism: the declaration's capability (``fits_model``, ``censored``, ``histogram``,
``reference``, ``public_n``, ...) or its lazy references (``runner``, ``fit``) say the
same thing for every mechanism. And there is one neighbour relation by default,
:data:`dpsynth.privacy.relations.DEFAULT_NEIGHBOURS`, wherever a function takes ``neighbours``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import dpsynth
from dpsynth.mechanisms import registry
from dpsynth.privacy import relations

ROOT = Path(__file__).resolve().parents[1]
DECLARATIONS = {ROOT / "dpsynth" / "registry.py"}
"""Where a mechanism's name may be compared: the declarations themselves."""


def _prefixes() -> frozenset[str]:
    """Every mechanism's name and each hyphenated prefix of one ("censor" of "censor-w")."""
    out = set(registry.NAMES)
    for name in registry.NAMES:
        parts = name.split("-")
        out |= {"-".join(parts[:i]) for i in range(1, len(parts))}
    return frozenset(out)


NAMES = _prefixes()


def _literals(node: ast.AST) -> list[str]:
    """The string literals ``node`` is, or holds as a literal tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for e in node.elts for s in _literals(e)]
    return []


def name_tests(source: str) -> list[tuple[int, str]]:
    """(line, literal) of every comparison, ``in`` test, ``startswith``/``endswith`` call or
    ``case`` pattern of ``source`` whose other side is a mechanism's name or a prefix of one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
        ):
            operands = list(node.args)
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        else:
            continue
        found += [(node.lineno, s) for op in operands for s in _literals(op) if s in NAMES]
    return found


def test_no_comparison_with_a_mechanism_name_outside_the_declarations():
    found = []
    for path in sorted((ROOT / "dpsynth").rglob("*.py")):
        if path in DECLARATIONS:
            continue
        where = path.relative_to(ROOT)
        found += [f"{where}:{line}: {s!r}" for line, s in name_tests(path.read_text())]
    assert found == [], (
        "compared with a mechanism's name outside dpsynth/mechanisms/registry.py (ask the declaration's "
        "capability instead):\n" + "\n".join(found)
    )


def test_the_scan_finds_every_form_of_a_name_test():
    src = (
        'if m == "ph": pass\n'
        'if m in ("lw", "other"): pass\n'
        'if m.startswith("censor"): pass\n'
        'if "sbs" != m: pass\n'
        'match m:\n    case "cw": pass\n'
    )
    assert [line for line, _ in name_tests(src)] == [1, 2, 3, 4, 6]
    # a name as a value, prose, or another literal is not a test of the name
    clean = 'R = Result("lw", 1)\nT = "lw and cw"\nif kind == "count": pass\nd = {"ph": 1}\n'
    assert name_tests(clean) == []


def _public_functions():
    """Every public function and method of every dpsynth module, once."""
    seen = set()
    for info in pkgutil.walk_packages(dpsynth.__path__, "dpsynth."):
        if info.name.endswith("__main__"):  # running it runs the CLI
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional dependency missing: nothing of it to check
            continue
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            candidates = [obj]
            if inspect.isclass(obj):
                candidates = [
                    v
                    for k, v in vars(obj).items()
                    if not k.startswith("_") and inspect.isfunction(v)
                ]
            for fn in candidates:
                if inspect.isfunction(fn) and fn not in seen:
                    seen.add(fn)
                    yield f"{module.__name__}.{fn.__qualname__}", fn


def _default_neighbours() -> dict[str, object]:
    """Each public function's default ``neighbours``, where it has one."""
    out = {}
    for where, fn in _public_functions():
        parameter = inspect.signature(fn).parameters.get("neighbours")
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            out[where] = parameter.default
    return out


def test_every_default_neighbour_relation_is_the_one_default():
    defaults = _default_neighbours()
    wrong = sorted(
        f"{where}: neighbours={default!r}"
        for where, default in defaults.items()
        if default not in (relations.DEFAULT_NEIGHBOURS, None)
    )
    assert wrong == [], (
        f"default neighbour relation other than relations.DEFAULT_NEIGHBOURS "
        f"({relations.DEFAULT_NEIGHBOURS!r}) or None meaning it:\n" + "\n".join(wrong)
    )
    assert defaults, "the scan found no function taking neighbours"
