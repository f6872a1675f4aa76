"""Move function-local imports to the top of their module, wherever the lint configuration allows them there.

ruff's PLC0415 (import-outside-top-level) flags an import made inside a function, except of the modules that
pyproject.toml lists under [tool.ruff.lint.flake8-tidy-imports] banned-module-level-imports: the heavy or optional
libraries (torch, triton, transformers, polars, pyarrow, ...) and the harness's own modules that import one of them
at their top. Those must stay lazy (TID253 refuses them at module level), so that `import harness.cli`, `bench
--help` and the pytest plugin load none of them. This script is the mechanical fix for every other one: it moves a
function-local `import x` / `from x import y` (the harness's own modules, the standard library, the rest) to the
module's import block, then lets ruff merge and sort import blocks (`--fix --select I` over the tree, and F401
where imports moved).

It leaves an import where it is, and says why, when
- its module is listed (kept lazy on purpose), or the line carries `# noqa: PLC0415` (one exception, with its reason);
- it is not the harness's own and sits in a `try` that catches ImportError (an optional dependency);
- moving it would change what a name means: the module already binds the name to something else, two functions
  import different things under one name, or the function also assigns the name;
- the two files are in an import circle (scripts/import_graph.py): break the circle first, by moving the shared
  piece down a layer, then run this again.
It also names each module of harness/ or kernels_under_test/ that loads a listed library when imported but is not
listed itself (list it, or make its import lazy), and exits 1 where anything is left to do.

    python scripts/hoist_imports.py            # rewrite harness/ and kernels_under_test/, then ruff --fix (on PATH
                                               # or beside this python: the dev extra installs it)
    python scripts/hoist_imports.py --check    # change nothing; exit 1 where a run would change something
    python scripts/hoist_imports.py --root DIR # another checkout (its pyproject.toml's list)

Rerunnable: a second run changes nothing. Run it after merging branches that added function-local imports.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_graph import strongly_connected  # noqa: E402 - the script's sibling, not a package

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "kernels_under_test")


def lazy_modules(repo: Path = REPO) -> tuple[str, ...]:
    """The modules listed as heavy: banned at module level, allowed in functions (pyproject.toml)."""
    conf = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    return tuple(conf["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-module-level-imports"])


def is_lazy(module: str, lazy: tuple[str, ...]) -> bool:
    """As ruff matches them: the module itself or one of its submodules."""
    return any(module == m or module.startswith(m + ".") for m in lazy)


def module_name(path: Path, repo: Path) -> str:
    parts = list(path.relative_to(repo).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    """The absolute module a `from ... import` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imported(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[tuple[ast.alias, list[str]]]:
    """Each alias with the absolute modules it may load (`from m import n`: m, and m.n where n is a module)."""
    if isinstance(node, ast.Import):
        return [(a, [a.name]) for a in node.names]
    src = resolve(node, module, is_pkg)
    return [(a, [src, f"{src}.{a.name}"]) for a in node.names]


def binding(node: ast.Import | ast.ImportFrom, alias: ast.alias, module: str, is_pkg: bool) -> tuple[str, tuple]:
    """(the name an alias binds, what it binds it to): `import a.b` binds `a` to the package a."""
    if isinstance(node, ast.Import):
        if alias.asname:
            return alias.asname, ("module", alias.name)
        return alias.name.split(".")[0], ("module", alias.name.split(".")[0])
    return alias.asname or alias.name, ("from", resolve(node, module, is_pkg), alias.name)


def statement(node: ast.Import | ast.ImportFrom, aliases: list[ast.alias]) -> str:
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)
    if isinstance(node, ast.Import):
        return f"import {names}"
    return f"from {'.' * node.level}{node.module or ''} import {names}"


def _targets(node: ast.AST):
    """Names a statement or expression binds (assignments, loops, with, walrus, except, defs)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        yield node.id
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg


def module_bindings(tree: ast.Module, module: str, is_pkg: bool) -> dict[str, set]:
    """What each module-level name is bound to: an import's source (("typing", source) under `if TYPE_CHECKING:`,
    which binds nothing at run time), or "other" (a def, class, assignment)."""
    out: dict[str, set] = {}

    def visit(stmts, typing=False):
        for s in stmts:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    if a.name != "*":
                        name, src = binding(s, a, module, is_pkg)
                        out.setdefault(name, set()).add(("typing", src) if typing else src)
            elif isinstance(s, ast.If) and "TYPE_CHECKING" in ast.unparse(s.test):
                visit([x for x in s.body if isinstance(x, (ast.Import, ast.ImportFrom))], typing=True)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.setdefault(s.name, set()).add("other")
            else:
                for child in ast.walk(s):
                    for name in _targets(child):
                        out.setdefault(name, set()).add("other")
                for sub in ("body", "orelse", "finalbody", "handlers"):
                    if isinstance(s, (ast.If, ast.Try, ast.With, ast.For, ast.While)) and hasattr(s, sub):
                        visit([x for x in getattr(s, sub) if isinstance(x, (ast.Import, ast.ImportFrom))])
    visit(tree.body)
    return out


def at_run_time(srcs: set) -> set:
    return {x for x in srcs if not (isinstance(x, tuple) and x[0] == "typing")}


def function_bindings(fn: ast.AST) -> set[str]:
    """Names a function binds other than by import: its parameters and assignments (nested defs' own left out)."""
    out = set()
    args = fn.args
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None:
            out.add(a.arg)
    for node in walk_function(fn):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(_targets(node))
    return out


def walk_function(fn: ast.AST):
    """The nodes of a function's body, without those of the functions and classes defined in it."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


@dataclass
class Local:
    """One function-local import statement and what becomes of each of its aliases."""
    node: ast.Import | ast.ImportFrom
    fn: ast.AST
    body: list  # the statement list that holds it
    hoist: list[ast.alias] = field(default_factory=list)
    keep: list[ast.alias] = field(default_factory=list)


@dataclass
class FileResult:
    path: Path
    hoisted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # "line: statement: why"
    new_text: str | None = None


def local_imports(tree: ast.Module):
    """(import, the functions around it (outermost first), the body list holding it, inside a try) for every
    import inside a function."""
    def visit(node, fns, in_try):
        for name, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for child in items:
                if not isinstance(child, ast.AST):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)) and fns:
                    yield child, fns, value, in_try
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield from visit(child, (*fns, child), False)
                elif isinstance(child, ast.Try) and guards_import(child):
                    yield from visit(child, fns, True)
                else:
                    yield from visit(child, fns, in_try)
    yield from visit(tree, (), False)


def guards_import(node: ast.Try) -> bool:
    """A try whose handlers catch ImportError (or ModuleNotFoundError): what it imports may be missing."""
    for h in node.handlers:
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if any(isinstance(t, ast.Name) and t.id in ("ImportError", "ModuleNotFoundError") for t in types):
            return True
    return False


def plan_file(path: Path, repo: Path, lazy: tuple[str, ...], circles: list[set[str]],
              own: set[str]) -> FileResult:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    module, is_pkg = module_name(path, repo), path.name == "__init__.py"
    circle_of = {m: i for i, c in enumerate(circles) for m in c}
    top = module_bindings(tree, module, is_pkg)
    res = FileResult(path)
    found: list[Local] = []
    wanted: dict[str, set] = {}  # name -> sources the hoists would bind it to
    for node, fns, body, in_try in local_imports(tree):
        fn = fns[-1]
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        loc = Local(node, fn, body)
        found.append(loc)
        line = lines[node.lineno - 1]
        # the function's own names, and those of the functions around it (a closure would shadow the module's)
        own_fn = set().union(*(function_bindings(f) for f in fns))
        for alias, mods in imported(node, module, is_pkg):
            why = None
            targets = [m for m in mods if m in own]
            if any(is_lazy(m, lazy) for m in mods):
                why = "listed as heavy (kept lazy)"
            elif "noqa" in line and ("PLC0415" in line or "noqa:" not in line):
                why = "# noqa: PLC0415 on the line"
            elif in_try and not targets:  # the harness's own modules are always there
                why = "inside a try that catches ImportError (an optional dependency)"
            elif alias.name == "*":
                why = "a star import"
            elif any(t in circle_of and circle_of.get(module) == circle_of[t] for t in targets):
                why = "the two files are in an import circle: break it first (scripts/import_graph.py)"
            else:
                name, src = binding(node, alias, module, is_pkg)
                bound = top.get(name, set())
                typing_only = {x[1] for x in bound - at_run_time(bound)}
                if name in own_fn:
                    why = f"the function (or one around it) also binds {name!r}"
                elif (at_run_time(bound) | typing_only) - {src}:
                    why = f"the module already binds {name!r} to something else"
                else:
                    wanted.setdefault(name, set()).add(src)
            if why:
                loc.keep.append(alias)
                if why not in ("listed as heavy (kept lazy)", "# noqa: PLC0415 on the line"):
                    res.kept.append(f"{node.lineno}: {statement(node, [alias])}: {why}")
            else:
                loc.hoist.append(alias)
        span = "".join(lines[node.lineno - 1:node.end_lineno]).strip()
        if span != ast.get_source_segment(text, node).strip():
            if loc.hoist:  # `import x; y()`: left to a person
                res.kept += [f"{node.lineno}: {statement(node, [a])}: not alone on its line" for a in loc.hoist]
                loc.keep += loc.hoist
                loc.hoist = []
    clash = {n for n, srcs in wanted.items() if len(srcs) > 1}
    for loc in found:
        for a in list(loc.hoist):
            name, _ = binding(loc.node, a, module, is_pkg)
            if name in clash:
                loc.hoist.remove(a)
                loc.keep.append(a)
                res.kept.append(f"{loc.node.lineno}: {statement(loc.node, [a])}: two functions import different "
                                f"things as {name!r}")
    moving = [loc for loc in found if loc.hoist]
    if not moving:
        return res
    res.new_text = rewrite(lines, tree, module, is_pkg, moving, top)
    res.hoisted = [f"{loc.node.lineno}: {statement(loc.node, loc.hoist)}" for loc in moving]
    return res


def rewrite(lines: list[str], tree: ast.Module, module: str, is_pkg: bool, moving: list[Local],
            top: dict[str, set]) -> str:
    out = list(lines)
    drop: set[int] = set()  # 0-based line numbers
    replace: dict[int, str] = {}
    for loc in moving:
        i = loc.node.lineno - 1
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        drop.update(range(i, loc.node.end_lineno))
        if loc.keep:
            drop.discard(i)
            replace[i] = indent + statement(loc.node, loc.keep) + "\n"
    # A body left empty gets `pass`; a blank line right after a removed block goes with it.
    for loc in moving:
        if not loc.keep and all(s.lineno - 1 in drop for s in loc.body
                                if isinstance(s, (ast.Import, ast.ImportFrom))) \
                and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in loc.body):
            first = loc.body[0].lineno - 1
            indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
            drop.discard(first)
            replace[first] = indent + "pass\n"
            drop.update(range(first + 1, loc.body[0].end_lineno))
    for i in sorted(drop):
        nxt = i + 1
        if nxt not in drop and nxt < len(lines) and not lines[nxt].strip():
            drop.add(nxt)
    new_top: list[str] = []
    seen = set()
    for loc in moving:
        for a in loc.hoist:
            name, src = binding(loc.node, a, module, is_pkg)
            if src in at_run_time(top.get(name, set())) and not (isinstance(loc.node, ast.Import) and not a.asname):
                continue  # the module imports it already
            stmt = statement(loc.node, [a])
            if stmt not in seen:
                seen.add(stmt)
                new_top.append(stmt + "\n")
    at = insertion_line(tree)
    for i, text in replace.items():
        out[i] = text
    for i in sorted(drop, reverse=True):
        del out[i]
    if new_top:
        shift = sum(1 for i in drop if i < at)
        pos = at - shift
        block = new_top if at and not lines[at - 1].startswith('"""') else ["\n", *new_top]
        out[pos:pos] = block
    return "".join(out)


def insertion_line(tree: ast.Module) -> int:
    """The 0-based line after the module's last top-level import of its leading block (else after the
    docstring and `from __future__`)."""
    end = 0
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            end = s.end_lineno
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            end = end or s.end_lineno
        elif isinstance(s, (ast.If, ast.Try)) and all(isinstance(x, (ast.Import, ast.ImportFrom, ast.Pass))
                                                       for x in ast.walk(s) if isinstance(x, ast.stmt) and x is not s):
            continue  # `if TYPE_CHECKING:` / `try: import x` among the imports
        else:
            break
    return end


def top_imports(path: Path, module: str, is_pkg: bool) -> set[str]:
    """Absolute modules a file imports when it is imported (module level, in any if/try there)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    stack = list(tree.body)
    while stack:
        s = stack.pop()
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            if isinstance(s, ast.ImportFrom) and s.module == "__future__":
                continue
            for _, mods in imported(s, module, is_pkg):
                out.update(mods)
        elif isinstance(s, ast.If) and "TYPE_CHECKING" in ast.unparse(s.test):
            continue
        elif isinstance(s, (ast.If, ast.Try)):
            stack.extend(s.body + s.orelse + getattr(s, "finalbody", []))
            for h in getattr(s, "handlers", []):
                stack.extend(h.body)
    return out


def heavy_unlisted(repo: Path, files: list[Path], lazy: tuple[str, ...]) -> dict[str, str]:
    """Own modules that load a listed library when imported, though not listed themselves: {module: library}."""
    mods = {module_name(f, repo): f for f in files}
    direct = {m: top_imports(f, m, f.name == "__init__.py") for m, f in mods.items()}
    # importing a.b.c runs a/__init__.py and a/b/__init__.py first
    deps: dict[str, set[str]] = {}
    for m, imps in direct.items():
        d = set()
        for i in imps:
            parts = i.split(".")
            d.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
        deps[m] = {x for x in d if x != m}
    memo: dict[str, str | None] = {}

    def heavy(m: str, stack: frozenset = frozenset()) -> str | None:
        if m in memo:
            return memo[m]
        if m in stack:
            return None
        hit = None
        for d in sorted(deps.get(m, ())):
            if is_lazy(d, lazy) and d.split(".")[0] not in PACKAGES:
                hit = d
            elif d in deps and not is_lazy(d, lazy):
                below = heavy(d, stack | {m})
                hit = below and f"{below} (through {d})"
            elif d in deps:
                hit = f"{d} (listed)"
            if hit:
                break
        memo[m] = hit
        return hit
    return {m: why for m in sorted(mods) if not is_lazy(m, lazy) and (why := heavy(m))}


def own_files(repo: Path) -> list[Path]:
    return sorted(f for pkg in PACKAGES for f in (repo / pkg).rglob("*.py"))


def file_circles(repo: Path, files: list[Path]) -> list[set[str]]:
    """Circles between files, every import counted (function-local ones too), as scripts/import_graph.py draws them."""
    mods = {module_name(f, repo): f for f in files}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a, targets in imported(node, m, f.name == "__init__.py"):
                    hit = [t for t in targets if t in mods and t != m]
                    if isinstance(node, ast.ImportFrom) and len(hit) == 2:
                        hit = hit[1:]  # `from pkg import mod`: the module, not pkg's __init__
                    graph[m].update(hit)
    return strongly_connected(graph)


def run_ruff(paths: list[Path], repo: Path) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists() and not shutil.which(ruff):
        print("hoist_imports: ruff not found (pip install ruff): the moved imports are in place but not sorted",
              file=sys.stderr)
        return
    # F401 only where imports moved (an import a function did not use); import blocks sorted everywhere, so that
    # files merged from other branches pass `ruff check` too.
    if paths:
        subprocess.run([ruff, "check", "--fix", "--select", "F401", "--quiet", *map(str, paths)], cwd=repo)
    subprocess.run([ruff, "check", "--fix", "--select", "I", "--quiet", "."], cwd=repo)


def main(argv: list[str], repo: Path = REPO) -> int:
    check = "--check" in argv
    lazy = lazy_modules(repo)
    files = own_files(repo)
    own = {module_name(f, repo) for f in files}
    circles = file_circles(repo, files)
    results = [plan_file(f, repo, lazy, circles, own) for f in files]
    changed = [r for r in results if r.new_text is not None]
    moved = sum(len(r.hoisted) for r in changed)
    for r in changed:
        for h in r.hoisted:
            print(f"{'would move' if check else 'moved'} {r.path.relative_to(repo)}:{h}")
        if not check:
            r.path.write_text(r.new_text, encoding="utf-8")
    if not check:
        run_ruff([r.path for r in changed], repo)
    kept = [(r.path, k) for r in results for k in r.kept]
    for path, k in kept:
        print(f"left in its function: {path.relative_to(repo)}:{k}")
    heavy = heavy_unlisted(repo, files, lazy)
    for m, why in heavy.items():
        print(f"loads {why} when imported but is not listed in banned-module-level-imports: {m}")
    for c in circles:
        print("import circle: " + " <-> ".join(sorted(c)))
    print(f"hoist_imports: {moved} import statement(s) {'to move' if check else 'moved'} in {len(changed)} file(s); "
          f"{len(kept)} left in their function with a reason above; {len(heavy)} heavy module(s) not listed; "
          f"{len(circles)} import circle(s)")
    return 1 if (check and changed) or kept or heavy or circles else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    root = Path(args[args.index("--root") + 1]).resolve() if "--root" in args else REPO
    sys.exit(main(args, repo=root))
