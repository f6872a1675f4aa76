"""The import graph of `harness`, by top-level unit (a package or a module directly under harness/), and by file.

Prints the units, every import between them (function-local imports included: they are still edges),
the import circles between units and between files (of harness/ and kernels_under_test/, each with the
names that tie it), the imports that run from a lower layer up to a higher one (layers below), the
imports of another package's `_private` module, and the files over 400 lines. Exits 1 where there is a
circle, so a script or CI step can gate on it.

    python scripts/import_graph.py [--edges]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "harness"
PACKAGES = ("harness", "kernels_under_test")  # the file-level graph covers both

# Lower layers first: a unit may import units of its own or a lower layer. The pipeline's order
# (ARCHITECTURE.md): inputs/devices/telemetry/results are leaves (so is workers, the child processes that
# runner, multigpu and commits start), capture and kernels make what the
# runner times, analysis reads what results stores, report renders it. `commits` (revision comparisons
# and the nightly job) runs the whole pipeline and writes its reports, so it sits above report; the
# suite layer, the pytest plugin and the CLI (with `python -m harness`) sit on top.
LAYERS = [
    {"errors", "__init__"},
    {"inputs", "devices", "telemetry", "results", "config", "numerics", "workers"},
    {"capture", "kernels"},
    {"analysis"},
    {"runner"},
    {"profiling", "multigpu"},
    {"report", "history"},
    {"commits"},
    {"suite", "doctor", "pytest_plugin"},
    {"cli", "__main__"},
]
LAYER = {u: i for i, layer in enumerate(LAYERS) for u in layer}


def unit_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def from_target(node: ast.ImportFrom, here: list[str], is_pkg: bool) -> str:
    """The module a `from ... import` names, a relative one resolved against the importing module `here`."""
    if not node.level:
        return node.module or ""
    base = here if is_pkg else here[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path):
    """(imported module, line) for every `harness...` import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("harness"):
                    yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            mod = from_target(node, here, is_pkg)
            if mod.startswith("harness"):
                if mod == "harness":
                    for a in node.names:
                        yield f"harness.{a.name}", node.lineno
                else:
                    yield mod, node.lineno
                    for a in node.names:  # `from harness.x import _y` where _y is a module
                        if (ROOT.parent / Path(*mod.split("."), f"{a.name}.py")).exists():
                            yield f"{mod}.{a.name}", node.lineno


def file_graph() -> dict[str, dict[str, set[str]]]:
    """{module: {imported module: names taken}} over the files of PACKAGES, function-local imports included.

    `from pkg import name` is an edge to pkg.name where that is a module, else to pkg (its __init__.py);
    `import a.b` is an edge to a.b (the parents' __init__.py files run too, but every file of a package
    does that: it is no circle)."""
    paths = {module_name(f): f for pkg in PACKAGES for f in sorted((ROOT.parent / pkg).rglob("*.py"))}
    graph: dict[str, dict[str, set[str]]] = {m: {} for m in paths}
    for mod, path in paths.items():
        here = mod.split(".")
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in paths:
                        graph[mod].setdefault(a.name, set()).add(a.asname or a.name)
            elif isinstance(node, ast.ImportFrom):
                target = from_target(node, here, is_pkg)
                for a in node.names:
                    dst = f"{target}.{a.name}" if f"{target}.{a.name}" in paths else target
                    if dst in paths and dst != mod:
                        graph[mod].setdefault(dst, set()).add(a.name)
    return graph


def main(argv: list[str]) -> int:
    files = sorted(ROOT.rglob("*.py"))
    units = sorted({unit_of(f) for f in files})
    edges: dict[tuple[str, str], list[str]] = {}
    private: list[str] = []
    for f in files:
        src = unit_of(f)
        for mod, line in imports_of(f):
            parts = mod.split(".")
            if len(parts) < 2:
                continue
            dst = parts[1]
            if dst not in units or dst == src:
                continue
            edges.setdefault((src, dst), []).append(f"{f.relative_to(ROOT.parent)}:{line} {mod}")
            if any(p.startswith("_") and not p.startswith("__") for p in parts[2:]):
                private.append(f"{f.relative_to(ROOT.parent)}:{line} imports {mod}")
    graph: dict[str, set[str]] = {u: set() for u in units}
    for a, b in edges:
        graph[a].add(b)
    cycles = strongly_connected(graph)
    upward = [(a, b, where) for (a, b), where in sorted(edges.items())
              if LAYER.get(a, 99) < LAYER.get(b, 99)]
    big = [(f, n) for f in files if (n := len(f.read_text(encoding="utf-8").splitlines())) > 400]
    print(f"units: {len(units)}  edges: {len(edges)}")
    unknown = [u for u in units if u not in LAYER]
    if unknown:
        print(f"units without a layer (add them to LAYERS): {', '.join(unknown)}")
    print(f"import circles: {len(cycles)}")
    for c in cycles:
        print("  " + " <-> ".join(sorted(c)))
    files = file_graph()
    file_cycles = strongly_connected({m: set(d) for m, d in files.items()})
    print(f"import circles between files: {len(file_cycles)}")
    for c in file_cycles:
        print("  " + " <-> ".join(sorted(c)))
        for a in sorted(c):
            for b in sorted(set(files[a]) & c):
                print(f"    {a} -> {b}: {', '.join(sorted(files[a][b]))}")
    print(f"imports from a lower layer up to a higher one: {len(upward)}")
    for a, b, where in upward:
        print(f"  {a} (layer {LAYER.get(a)}) -> {b} (layer {LAYER.get(b)}): {where[0]}" +
              (f" (+{len(where) - 1} more)" if len(where) > 1 else ""))
    print(f"imports of another package's private module: {len(private)}")
    for p in private:
        print("  " + p)
    print(f"files over 400 lines: {len(big)}")
    for f, n in big:
        print(f"  {f.relative_to(ROOT.parent)} ({n})")
    if "--edges" in argv:
        for (a, b), where in sorted(edges.items()):
            print(f"{a} -> {b}: {len(where)}")
    return 1 if cycles or file_cycles else 0


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm; only components of two or more units (the circles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
