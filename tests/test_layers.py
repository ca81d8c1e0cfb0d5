"""The package's architecture, checked: packages by concept, layered from base to CLI.

Every import in ``dpsynth/`` (module-level and function-local) goes from a package to one at
the same or an earlier position of :data:`dpsynth.LAYERS`; no two modules import each other,
directly or through others; CONTRIBUTING.md's map lists every package and module there is.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dpsynth

ROOT = Path(dpsynth.__file__).resolve().parent
REPO = ROOT.parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """dpsynth modules ``path`` imports anywhere (a name imported from a package counts as
    its submodule when one exists)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "dpsynth"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "dpsynth":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return found


def _group(module: str) -> str:
    """The layer a module belongs to: its package, or "base" for a top-level module."""
    parts = module.split(".")
    if len(parts) == 1:
        return "base"
    if parts[1] == "__main__":
        return "cli"
    return parts[1] if (ROOT / parts[1]).is_dir() else "base"


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(dpsynth.LAYERS) - {"base"}
    assert dpsynth.LAYERS[0] == "base"


def test_imports_follow_the_layers() -> None:
    modules = _modules()
    rank = {name: i for i, name in enumerate(dpsynth.LAYERS)}
    upward = []
    for module, path in modules.items():
        for target in _imports(path, modules):
            if rank[_group(target)] > rank[_group(module)]:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports against the layers (dpsynth.LAYERS): " + ", ".join(upward)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {
        m: {t for t in _imports(p, modules) if t != m and t != "dpsynth"}
        for m, p in modules.items()
    }
    # a package's __init__ holds only its docstring (test below), so importing a submodule
    # through it adds no edge
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_package_inits_hold_only_a_docstring() -> None:
    for init in ROOT.glob("*/__init__.py"):
        if init.parent.name in {"engine", "studies"}:
            continue  # engine's interface and the studies' package docstring predate the map
        body = ast.parse(init.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), init


def test_the_contributing_map_lists_every_package_and_module() -> None:
    text = (REPO / "CONTRIBUTING.md").read_text()
    section = text.split("## The map of the package", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| `")]
    listed: dict[str, set[str]] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        listed[cells[0].strip("`")] = set(re.findall(r"`([a-z_]+)`", cells[1]))
    assert list(listed) == list(dpsynth.LAYERS), "the map's rows, in the layers' order"
    for layer, names in listed.items():
        if layer == "base":
            actual = {p.stem for p in ROOT.glob("*.py") if p.stem not in {"__init__", "__main__"}}
        else:
            actual = {p.stem for p in (ROOT / layer).glob("*.py") if p.stem != "__init__"}
        assert names == actual, (
            f"CONTRIBUTING map, {layer}: lists {sorted(names)}, has {sorted(actual)}"
        )
