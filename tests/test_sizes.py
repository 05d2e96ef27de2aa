"""Files of at most 800 lines, functions of at most 80 (decorators included), checked on the source (AST).

The few that were larger when the rule came in are listed with their size then: each may only shrink (a list that
only shrinks; an entry is dropped once its file or function fits).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("app", "engine", "widgets", "tests", "benchmarks")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80

LARGER_FILES = {  # path -> its lines at most
    "benchmarks/hostile.py": 1321,
    "tests/engine/test_fuzz_inputs.py": 1141,
}
LARGER_FUNCTIONS = {  # "path:function" -> its lines at most
    "benchmarks/bigsession_bench.py:_follow_run": 90,
    "benchmarks/hostile.py:_add_index_cases": 126,
    "benchmarks/hostile.py:_add_line_cases": 170,
    "benchmarks/hostile.py:_add_opencode_cases": 82,
    "benchmarks/usage_bench.py:make_big_index": 98,
    "benchmarks/window_follow_bench.py:_child": 102,
    "tests/app/test_flow.py:test_whole_flow": 123,
    "tests/fakeserver.py:_make_handler": 141,
}


def sizes(source: str, name: str) -> tuple[int, dict[str, int]]:
    """The lines of ``source`` and of each of its functions (methods and nested ones too, by name)."""
    functions: dict[str, int] = {}
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - start + 1
            functions[node.name] = max(length, functions.get(node.name, 0))
    return len(source.splitlines()), functions


def oversized(root: Path = REPO) -> list[str]:
    bad = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if "node_modules" in path.parts:  # the real agents' npm packages (tests/agents), not ours
                continue
            name = str(path.relative_to(root))
            lines, functions = sizes(path.read_text(encoding="utf-8"), name)
            if lines > LARGER_FILES.get(name, MAX_FILE_LINES):
                bad.append(f"{name}: {lines} lines")
            for function, length in sorted(functions.items()):
                if length > LARGER_FUNCTIONS.get(f"{name}:{function}", MAX_FUNCTION_LINES):
                    bad.append(f"{name}:{function}: {length} lines")
    return bad


def test_files_and_functions_are_within_their_size() -> None:
    assert oversized() == []


def test_the_listed_exceptions_are_still_larger_than_the_rule() -> None:
    """An entry whose file or function now fits the rule is dropped from the lists (they only shrink)."""
    assert all(n > MAX_FILE_LINES for n in LARGER_FILES.values())
    assert all(n > MAX_FUNCTION_LINES for n in LARGER_FUNCTIONS.values())
    fits = []
    for name in LARGER_FILES:
        path = REPO / name
        if path.exists() and sizes(path.read_text(encoding="utf-8"), name)[0] <= MAX_FILE_LINES:
            fits.append(name)
    for key in LARGER_FUNCTIONS:
        name, _, function = key.partition(":")
        path = REPO / name
        if path.exists() and sizes(path.read_text(encoding="utf-8"), name)[1].get(function, 0) <= MAX_FUNCTION_LINES:
            fits.append(key)
    assert fits == []


def test_the_checker_catches_a_long_file_and_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "engine" / "long.py").write_text("@decorated\ndef f():\n" + body + "\n" * 720)
    assert sizes("def f():\n" + body, "f.py") == (81, {"f": 81})
    assert oversized(tmp_path) == ["engine/long.py: 802 lines", "engine/long.py:f: 82 lines"]
