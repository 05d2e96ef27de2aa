"""The architecture's import rules, checked on the source (AST), not by hope."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_ENGINE = ("PySide6", "shiboken6", "qasync", "pyqtgraph", "app", "widgets")
LITELLM_ALLOWED = {"engine/llm/client.py", "engine/llm/local_model.py"}


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, node.lineno))
    return found


def _violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((REPO / folder).rglob("*.py")):
        for name, line in _imports(path):
            top = name.split(".")[0]
            if top in forbidden:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return bad


def test_engine_imports_no_qt_and_no_ui() -> None:
    assert _violations("engine", FORBIDDEN_IN_ENGINE) == []


def test_only_llm_modules_import_litellm() -> None:
    bad = [v for v in _violations("engine", ("litellm",)) if v.split(":")[0] not in LITELLM_ALLOWED]
    bad += _violations("widgets", ("litellm",)) + _violations("app", ("litellm",))
    assert bad == []


def test_widgets_never_import_app() -> None:
    assert _violations("widgets", ("app",)) == []


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import os\nfrom PySide6.QtCore import QObject\n__import__('qasync')\n")
    names = [n for n, _ in _imports(bad)]
    assert "PySide6.QtCore" in names and "qasync" in names


# --------------------------------------------------------------------------- the engine's layers

# lower never imports higher; modules of one layer may import each other (but never in a cycle)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("engine.model",),
    ("engine.store",),
    ("engine.llm", "engine.capture"),  # capture: the recording proxy and its files (engine.sources.capture reads them)
    ("engine.context",),
    ("engine.tools",),
    ("engine.sources",),
    ("engine.agent", "engine.importer", "engine.ingest", "engine.transcript"),
    ("engine.usage", "engine.export"),  # the export prices each call (engine.usage.costs)
    ("engine.workbench",),
)
SPEC_SHIMS = ("engine.tokens", "engine.budget", "engine.turns", "engine.offload", "engine.compaction")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _all_imports(path: Path, module: str) -> set[str]:
    """Every module ``path`` imports, anywhere in it (function bodies and TYPE_CHECKING blocks too),
    relative imports resolved; ``from a import b`` counts as ``a.b`` when that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        found.update(_imported(node, package))
    return found


def _imported(node: ast.AST, package: str) -> set[str]:
    """The modules one ``import`` statement of a module in ``package`` names (none for any other node): relative
    imports resolved; ``from a import b`` names ``a`` and ``a.b``."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    return {base, *(f"{base}.{alias.name}" for alias in node.names)}


def import_graph(root: Path, package: str = "engine") -> dict[str, set[str]]:
    """{module: the modules of ``package`` it imports}, derived from the source under ``root``."""
    files = {_module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    for name, path in files.items():
        targets = {t for t in _all_imports(path, name) if t in files and t != name}
        # ``from engine.context import b`` names the package only to reach b: the edge is to b
        graph[name] = {t for t in targets if t not in packages or not any(u.startswith(t + ".") for u in targets)}
        graph[name].discard(package)
    return graph


def layer_of(module: str) -> int | None:
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in sorted(graph.items()):
        src = layer_of(source)
        for target in sorted(targets):
            dst = layer_of(target)
            if src is not None and dst is not None and dst > src:
                bad.append(f"{source} (layer {src}) imports {target} (layer {dst})")
    return bad


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as [a, b, …, a], or [] when there is none (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        path = [start]
        state[start] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                state[node] = 2
                continue
            nxt = todo.pop(0)
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(graph.get(nxt, ()))))
    return []


def shim_importers(root: Path) -> list[str]:
    """Project files that import one of the five SPEC shims (kept for external callers only)."""
    bad = []
    for folder in ("app", "engine", "widgets", "benchmarks", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            if "node_modules" in path.parts:  # the real agents' npm packages (tests/agents), not ours
                continue
            name = _module_name(path, root)
            hits = _all_imports(path, name) & set(SPEC_SHIMS)
            hits |= {f"engine.{n}" for n in _engine_names(path) if f"engine.{n}" in SPEC_SHIMS}
            if hits:
                bad.append(f"{path.relative_to(root)} imports {', '.join(sorted(hits))}")
    return bad


def _engine_names(path: Path) -> set[str]:
    """Names imported with ``from engine import x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "engine" and node.level == 0
        for alias in node.names
    }


def test_every_engine_module_has_a_layer() -> None:
    graph = import_graph(REPO)
    assert [m for m in graph if m != "engine" and layer_of(m) is None and m not in SPEC_SHIMS] == []


def test_engine_layers_import_only_downwards() -> None:
    assert layer_violations(import_graph(REPO)) == []


def test_no_import_cycle_in_engine() -> None:
    assert find_cycle(import_graph(REPO)) == []


# --------------------------------------------------------------------------- import cycles as Python runs them

def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_imports(path: Path, module: str) -> set[str]:
    """The modules ``path`` imports when it runs: at the top and in function bodies (a lazy import counts: the
    cycle it closes is one the day the import moves up, and it runs the other module's imports in the middle of
    this one's work), not under ``if TYPE_CHECKING:`` (never run); relative imports resolved; ``from a import b``
    names ``a`` and ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo.extend(child.orelse)
                continue
            found.update(_imported(child, package))
            todo.append(child)
    return found


def runtime_graph(root: Path, packages: tuple[str, ...] = ("engine", "app")) -> dict[str, set[str]]:
    """{module: the project modules importing it runs}: importing ``a.b.c`` runs ``a``'s and ``a.b``'s
    ``__init__`` first, so the edge goes to each of them too (a package's ``__init__`` is a module of the graph)."""
    files = {_module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        edges: set[str] = set()
        for target in runtime_imports(path, name):
            parts = target.split(".")
            edges.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        graph[name] = {t for t in edges if t in files and t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, round about (the strongly connected components of more than
    one module, each sorted; Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def test_no_import_cycle_in_engine_nor_app_as_python_runs_them() -> None:
    """engine/ and app/ together, package ``__init__``s included, lazy imports too (type-only ones not)."""
    assert import_cycles(runtime_graph(REPO)) == []


def test_cycle_checker_catches_a_package_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "engine" / "wb"
    pkg.mkdir(parents=True)
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    # the package's __init__ hands out its service lazily; the service's part imports a sibling through the package
    (pkg / "__init__.py").write_text("def __getattr__(name):\n    from engine.wb.service import S\n    return S\n")
    (pkg / "service.py").write_text("from engine.wb.part import P\nS = P\n")
    (pkg / "part.py").write_text("from engine.wb import views\nP = 1\n")
    (pkg / "views.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from engine.wb.part import P\n")
    (tmp_path / "app" / "window.py").write_text("from app import wire\n")
    (tmp_path / "app" / "wire.py").write_text("def f():\n    from app.window import W\n")
    graph = runtime_graph(tmp_path)
    assert graph["engine.wb.views"] == set()  # type-only: not run
    assert import_cycles(graph) == [["app.window", "app.wire"], ["engine.wb", "engine.wb.part", "engine.wb.service"]]
    (pkg / "__init__.py").write_text('"""a package that imports nothing"""\n')
    (tmp_path / "app" / "wire.py").write_text("")
    assert import_cycles(runtime_graph(tmp_path)) == []


def test_no_import_cycle_in_app_nor_widgets() -> None:
    """The window's wiring modules see it through app.window_base, not app.main_window (which imports them); a
    type-only import counts too."""
    for package in ("app", "widgets"):
        assert find_cycle(import_graph(REPO, package)) == [], package


def test_nothing_in_the_project_imports_the_spec_shims() -> None:
    allowed = {"tests/engine/test_spec_shims.py"}
    assert [b for b in shim_importers(REPO) if b.split(" ")[0] not in allowed] == []


def test_layer_checker_catches_a_planted_cycle_and_violation(tmp_path: Path) -> None:
    pkg = tmp_path / "engine"
    (pkg / "model").mkdir(parents=True)
    (pkg / "context").mkdir()
    for folder in (pkg, pkg / "model", pkg / "context"):
        (folder / "__init__.py").write_text("")
    (pkg / "model" / "a.py").write_text("def f():\n    from engine.context import b\n")  # upward, in a function
    (pkg / "context" / "b.py").write_text("from ..model import a\n")  # relative, back down: a cycle
    (pkg / "context" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from engine.context.d import X\n")
    (pkg / "context" / "d.py").write_text("from engine.context import c\n")
    (pkg / "budget.py").write_text("")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_text("from engine import budget\n")
    for folder in ("widgets", "benchmarks", "tests"):
        (tmp_path / folder).mkdir()
    graph = import_graph(tmp_path)
    assert graph["engine.model.a"] == {"engine.context.b"} and graph["engine.context.b"] == {"engine.model.a"}
    assert layer_violations(graph) == ["engine.model.a (layer 0) imports engine.context.b (layer 3)"]
    cycle = find_cycle(graph)
    assert cycle[0] == cycle[-1] and set(cycle) in ({"engine.model.a", "engine.context.b"},
                                                    {"engine.context.c", "engine.context.d"})
    del graph["engine.model.a"]
    assert set(find_cycle(graph)) == {"engine.context.c", "engine.context.d"}  # a type-only cycle counts too
    assert shim_importers(tmp_path) == ["app/x.py imports engine.budget"]
