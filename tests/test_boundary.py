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
