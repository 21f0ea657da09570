"""The package's import graph, read from the source (nothing is imported).

Used by ``test_architecture.py``, and runnable for figures:
``python tests/support/import_graph.py`` prints the cycles and the private names
imported across packages; ``python tests/support/import_graph.py --closure MODULE ...``
prints the modules a copy of MODULEs outside this package needs (CONTRIBUTING's
upstreaming steps).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "lmms_genbench"
PACKAGE = "lmms_genbench"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(current: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def imports(module_level_only: bool = True) -> dict[str, set[tuple[str, str | None]]]:
    """module -> {(imported module, imported name or None)} for our own modules.

    ``module_level_only`` keeps the imports that run when the module is imported
    (the ones that can form an import cycle); function-level imports are lazy.
    """
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[tuple[str, str | None]]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = tree.body if module_level_only else list(ast.walk(tree))
        if module_level_only:  # also imports under module-level `if`/`try`
            nodes = [n for top in tree.body for n in ast.walk(top) if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            nodes += [n for top in tree.body if isinstance(top, ast.ClassDef) for n in top.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        edges: set[tuple[str, str | None]] = set()
        is_package = path.name == "__init__.py"
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE):
                        edges.add((alias.name, None))
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(name, is_package, node.level, node.module)
                if not target.startswith(PACKAGE):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges.add((sub, None) if sub in modules else (target, alias.name))
        graph[name] = {(t, n) for t, n in edges if t in modules and t != name}
    return graph


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (import cycles).

    Lazy (function-level) imports count too: a cycle held together by a lazy
    import or a module ``__getattr__`` is still two modules that need each other.
    """
    graph = {m: {t for t, _ in edges} for m, edges in imports(module_level_only=False).items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            # a package importing its own submodules is how packages work, not a cycle
            if w.startswith(v + "."):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def closure(*modules: str) -> list[str]:
    """Every package module that importing ``modules`` can run, lazy imports included.

    This is what a copy of ``modules`` outside the package (vendored upstream) needs.
    A package ``__init__`` that only lies on the path to a module is not followed:
    a vendored copy can keep it empty. Modules imported by name from a registry table
    (``importlib``) are invisible here; pass them as ``modules`` too.
    """
    graph = imports(module_level_only=False)
    unknown = [m for m in modules if m not in graph]
    if unknown:
        raise ValueError(f"not modules of {PACKAGE}: {unknown}")
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += [t for t, _ in graph[module]]
    return sorted(seen)


def _package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else module


def private_imports_across_packages() -> list[str]:
    """``importer -> module.name`` where a private module or name of another
    top-level subpackage is imported (lazy imports included)."""
    out = []
    for importer, edges in imports(module_level_only=False).items():
        for target, name in edges:
            if _package_of(target) == _package_of(importer):
                continue
            private_module = any(p.startswith("_") and not p.startswith("__") for p in target.split("."))
            private_name = name is not None and name.startswith("_") and not name.startswith("__")
            if private_module or private_name:
                out.append(f"{importer} -> {target}{'.' + name if name else ''}")
    return sorted(out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--closure"]:
        needed = closure(*sys.argv[2:])
        print(f"{len(needed)} modules")
        print("\n".join(needed))
        sys.exit(0)
    found = cycles()
    print(f"import cycles: {len(found)}")
    for c in found:
        print("  " + " <-> ".join(c))
    private = private_imports_across_packages()
    print(f"private names imported across packages: {len(private)}")
    for p in private:
        print("  " + p)


_MUTATORS = {"append", "add", "update", "pop", "clear", "setdefault", "extend", "remove", "discard", "popitem",
             "move_to_end", "insert", "appendleft", "popleft"}
_CONTAINERS = {"dict", "list", "set", "OrderedDict", "defaultdict", "Counter", "deque", "local",
               "WeakValueDictionary", "WeakKeyDictionary"}


_CACHE_DECORATORS = {"lru_cache", "cache"}


def _callee(node: ast.AST) -> str | None:
    """``f`` of ``f``, ``m.f``, ``f(...)`` and ``m.f(...)``."""
    node = node.func if isinstance(node, ast.Call) else node
    return getattr(node, "id", None) or getattr(node, "attr", None)


def module_state(source: str) -> set[str]:
    """The names of a module's process-wide mutable state (see :func:`mutable_state`)."""
    tree = ast.parse(source)
    containers, objects = set(), set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        func = _callee(value) if isinstance(value, ast.Call) else None
        if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or func in _CONTAINERS:
            containers |= names
        elif func is not None and func.endswith("Cache"):  # a cache object: its own methods change it
            objects |= names
    changed, rebound, memoized = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            rebound |= set(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_callee(d) in _CACHE_DECORATORS for d in node.decorator_list):
                memoized.add(node.name)  # functools.lru_cache/cache: a process-wide memo, methods too
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _MUTATORS and isinstance(node.func.value, ast.Name)):
            changed.add(node.func.value.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            changed |= {t.value.id for t in targets
                        if isinstance(t, (ast.Subscript, ast.Attribute)) and isinstance(t.value, ast.Name)}
    return (containers & changed) | rebound | objects | memoized


def mutable_state() -> dict[str, set[str]]:
    """module -> names of its process-wide mutable state: a module-level container (a dict, list
    or set display or comprehension, or a call of a container type or ``threading.local``) that
    the module changes (an item or attribute assigned or deleted, a mutating method called); every
    name a function rebinds with ``global``; a module-level object of a ``*Cache`` class; and every
    function or method memoized with ``functools.lru_cache``/``cache``. Other objects of our own
    classes (a memo inside a scorer instance) are not counted: what this finds is state with no
    owner but the module."""
    found: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        names = module_state(path.read_text(encoding="utf-8"))
        if names:
            found[module_name(path)] = names
    return found
