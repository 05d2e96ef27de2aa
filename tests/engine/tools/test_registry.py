"""engine.tools.registry: one declaration per tool, and everything derived from it."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from engine.tools.registry import TOOLS, ToolBox, ToolError, approval_text, declaration, parse_arguments


def test_names_are_unique_and_looked_up() -> None:
    names = [decl.name for decl in TOOLS]
    assert names == ["read_file", "list_dir", "search_text", "write_file", "run_shell"]
    for decl in TOOLS:
        assert declaration(decl.name) is decl
    assert declaration("nope") is None


@pytest.mark.parametrize("decl", TOOLS, ids=lambda d: d.name)
def test_each_declaration_is_consistent(decl: Any) -> None:
    Draft202012Validator.check_schema(dict(decl.parameters))
    params = decl.parameters
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert set(decl.required) <= set(decl.properties)
    # the handler takes the workspace and exactly the declared arguments
    sig = inspect.signature(decl.handler)
    assert inspect.iscoroutinefunction(decl.handler)
    assert list(sig.parameters)[1:] == list(decl.properties)
    for name in decl.required:
        assert sig.parameters[name].default is inspect.Parameter.empty, name
    # a tool that needs approval is off by default and says why when asked
    assert decl.needs_approval == (decl.switch is not None)
    assert bool(decl.disabled_text) == (decl.switch is not None)
    assert bool(decl.approval_text({})) == decl.needs_approval


def test_spec_comes_from_the_declaration(tmp_path: Path) -> None:
    specs = ToolBox(tmp_path, tmp_path, allow_write=True, allow_shell=True).specs()
    assert [s["function"]["name"] for s in specs] == [decl.name for decl in TOOLS]
    for spec, decl in zip(specs, TOOLS, strict=True):
        assert spec["function"]["description"] == decl.description
        assert spec["function"]["parameters"] == dict(decl.parameters)
    specs[0]["function"]["parameters"]["properties"].clear()
    assert TOOLS[0].properties  # a caller's change never reaches the declaration


def test_approval_text_from_the_registry() -> None:
    assert approval_text("write_file", '{"path": "a.txt", "content": "x"}') == "It writes a file in the workspace."
    assert approval_text("run_shell", {"command": "ls"}) == "It runs a shell command in the workspace."
    assert approval_text("run_shell", "not json") == "It runs a shell command in the workspace."
    assert approval_text("read_file", '{"path": "a"}') == ""
    assert approval_text("nope", "{}") == ""


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        (
            "read_file",
            {"path": "a", "start_line": "3", "max_lines": 2.0},
            {"path": "a", "start_line": 3, "max_lines": 2},
        ),
        ("search_text", {"pattern": "x", "ignore_case": " True "}, {"pattern": "x", "ignore_case": True}),
        ("search_text", {"pattern": "x", "glob": None}, {"pattern": "x"}),
        ("run_shell", {"command": "ls", "timeout": "1.5"}, {"command": "ls", "timeout": 1.5}),
        ("run_shell", {"command": "ls", "timeout": 2}, {"command": "ls", "timeout": 2.0}),
    ],
)
def test_accepted_forms(tool: str, args: dict[str, Any], expected: dict[str, Any]) -> None:
    got = parse_arguments(tool, json.dumps(args))
    assert got == expected
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in expected.items()}


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("read_file", {"path": "a", "start_line": "x"}, "read_file: argument 'start_line' must be int, got \"x\""),
        ("read_file", {"path": "a", "start_line": True}, "read_file: argument 'start_line' must be int, got true"),
        ("read_file", {"path": "a", "max_lines": 0}, "read_file: max_lines must be 1 or more, got 0"),
        ("search_text", {"pattern": "x", "ignore_case": 1}, "search_text: argument 'ignore_case' must be bool, got 1"),
        ("search_text", {"pattern": "x", "max_results": "-4"}, "search_text: max_results must be 1 or more, got -4"),
        ("run_shell", {"command": "ls", "timeout": "no"}, "run_shell: argument 'timeout' must be float, got \"no\""),
        ("write_file", {"path": "a"}, "write_file: missing required argument(s) content"),
        ("write_file", {"path": None, "content": None}, "write_file: missing required argument(s) path, content"),
        # an unknown argument is named first, even with a null value and other faults present
        ("list_dir", {"bogus": None, "path": 3}, "list_dir: unknown argument(s) bogus (expected: path)"),
        ("read_file", {"file": "a"}, "read_file: unknown argument(s) file (expected: path, start_line, max_lines)"),
    ],
)
def test_refusals_name_the_argument(tool: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError) as info:
        parse_arguments(tool, json.dumps(args))
    assert str(info.value) == message


def test_unknown_tool_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="unknown tool 'nope'"):
        parse_arguments("nope", "{}")
