"""engine.tools.registry: specs, real files on disk, path confinement for every tool, approvals, errors."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from engine.tools import files
from engine.tools.registry import READ_MAX_BYTES, ToolBox, ToolResult, parse_arguments

PATH_TOOLS = {
    "read_file": lambda p: {"path": p},
    "list_dir": lambda p: {"path": p},
    "search_text": lambda p: {"pattern": "secret", "path": p},
    "write_file": lambda p: {"path": p, "content": "pwned"},
}


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    ws = tmp_path / "ws"
    session = tmp_path / "session"
    outside = tmp_path / "outside"
    for d in (ws / "src", session / "tool_results", session / "dialog", outside):
        d.mkdir(parents=True)
    (ws / "src" / "main.py").write_text("def main():\n    return 42\n", encoding="utf-8")
    (ws / "notes.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)), encoding="utf-8")
    (session / "tool_results" / "abc123.txt").write_text(
        "".join(f"result {i}\n" for i in range(1, 51)), encoding="utf-8"
    )
    (session / "dialog" / "2025-01-02.jsonl").write_text(
        json.dumps({"role": "user", "content": "archived hello"}) + "\n", encoding="utf-8"
    )
    (session / "history.jsonl").write_text('{"role": "user", "content": "live secret"}\n', encoding="utf-8")
    (outside / "secret.txt").write_text("top secret\n", encoding="utf-8")
    return {"ws": ws, "session": session, "outside": outside}


def box(dirs: dict[str, Path], **kw: Any) -> ToolBox:
    return ToolBox(dirs["ws"], dirs["session"], **kw)


async def allow(name: str, args: dict[str, Any]) -> bool:
    return True


def run(tb: ToolBox, name: str, args: dict[str, Any] | str) -> ToolResult:
    payload = args if isinstance(args, str) else json.dumps(args)
    return asyncio.run(tb.run(name, payload))


# ---------------------------------------------------------------------- specs


def test_specs_default_tools_only(dirs: dict[str, Path]) -> None:
    specs = box(dirs).specs()
    names = [s["function"]["name"] for s in specs]
    assert names == ["read_file", "list_dir", "search_text"]
    for spec in specs:
        assert spec["type"] == "function"
        params = spec["function"]["parameters"]
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        json.dumps(spec)  # serialisable as sent to a provider


def test_specs_with_write_and_shell(dirs: dict[str, Path]) -> None:
    names = [s["function"]["name"] for s in box(dirs, allow_write=True, allow_shell=True).specs()]
    assert names == ["read_file", "list_dir", "search_text", "write_file", "run_shell"]


def test_specs_are_copies(dirs: dict[str, Path]) -> None:
    tb = box(dirs)
    tb.specs()[0]["function"]["name"] = "changed"
    assert tb.specs()[0]["function"]["name"] == "read_file"


# ---------------------------------------------------------------------- read_file


def test_read_file_whole(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "read_file", {"path": "src/main.py"})
    assert res.ok
    assert res.text.startswith("def main():\n    return 42\n")
    assert "lines 1-2 of 2 in src/main.py; end of file" in res.text


def test_read_file_window_and_continuation_hint(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "read_file", {"path": "notes.txt", "start_line": 10, "max_lines": 5})
    assert res.ok
    body = res.text.splitlines()
    assert body[:5] == ["line 10", "line 11", "line 12", "line 13", "line 14"]
    assert 'read_file(path="notes.txt", start_line=15)' in res.text
    assert "of 100" in res.text


def test_read_file_follows_offload_hint_into_session(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "read_file", {"path": "tool_results/abc123.txt", "start_line": 41})
    assert res.ok, res.text
    assert res.text.splitlines()[0] == "result 41"
    assert "result 50" in res.text and "result 40\n" not in res.text
    assert "end of file" in res.text


def test_read_file_session_absolute_path(dirs: dict[str, Path]) -> None:
    path = dirs["session"] / "tool_results" / "abc123.txt"
    res = run(box(dirs), "read_file", {"path": str(path), "max_lines": 1})
    assert res.ok and res.text.startswith("result 1\n")
    assert 'start_line=2' in res.text


def test_read_file_dialog_archive(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "read_file", {"path": "dialog/2025-01-02.jsonl"})
    assert res.ok and "archived hello" in res.text


def test_read_file_refuses_other_session_files(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "read_file", {"path": str(dirs["session"] / "history.jsonl")})
    assert not res.ok and "outside" in res.text


def test_session_prefix_cannot_climb_to_session_files(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "read_file", {"path": "tool_results/../history.jsonl"})
    assert not res.ok and "'..'" in res.text and "live secret" not in res.text


def test_read_file_numbers_as_strings_accepted(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "read_file", {"path": "notes.txt", "start_line": "3", "max_lines": "1"})
    assert res.ok and res.text.startswith("line 3\n")


def test_read_file_past_end_and_bad_numbers(dirs: dict[str, Path]) -> None:
    tb = box(dirs)
    res = run(tb, "read_file", {"path": "notes.txt", "start_line": 500})
    assert not res.ok and "past the end" in res.text and "100 lines" in res.text
    res = run(tb, "read_file", {"path": "notes.txt", "start_line": 0})
    assert not res.ok and "start_line must be 1 or more" in res.text
    res = run(tb, "read_file", {"path": "notes.txt", "max_lines": "many"})
    assert not res.ok and "'max_lines' must be int" in res.text


def test_read_file_missing_folder_binary_empty(dirs: dict[str, Path]) -> None:
    tb = box(dirs)
    (dirs["ws"] / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    (dirs["ws"] / "empty.txt").write_bytes(b"")
    assert "no such file" in run(tb, "read_file", {"path": "nope.txt"}).text
    assert "is a folder" in run(tb, "read_file", {"path": "src"}).text
    res = run(tb, "read_file", {"path": "blob.bin"})
    assert not res.ok and "binary" in res.text
    res = run(tb, "read_file", {"path": "empty.txt"})
    assert res.ok and "empty" in res.text


def test_read_file_byte_bound_and_invalid_utf8(dirs: dict[str, Path]) -> None:
    big = dirs["ws"] / "big.txt"
    line = "é" * 499 + "\n"  # 999 bytes per line
    big.write_text(line * 200, encoding="utf-8")
    res = run(box(dirs), "read_file", {"path": "big.txt", "max_lines": 2000})
    assert res.ok
    assert len(res.text.encode("utf-8")) <= READ_MAX_BYTES + 200
    assert "start_line=" in res.text
    (dirs["ws"] / "bad.txt").write_bytes(b"ok \xff\xfe bytes\n")
    res = run(box(dirs), "read_file", {"path": "bad.txt"})
    assert res.ok and "ok \ufffd\ufffd bytes" in res.text


# ---------------------------------------------------------------------- list_dir


def test_list_dir(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "list_dir", {})
    assert res.ok
    lines = res.text.splitlines()
    assert lines[1] == "src/"  # folders first
    assert any(ln.startswith("notes.txt") for ln in lines)
    res = run(box(dirs), "list_dir", {"path": "tool_results"})
    assert res.ok and "abc123.txt" in res.text
    assert "is a file" in run(box(dirs), "list_dir", {"path": "notes.txt"}).text


# ---------------------------------------------------------------------- search_text


def test_search_text_matches_and_bounds(dirs: dict[str, Path]) -> None:
    tb = box(dirs)
    res = run(tb, "search_text", {"pattern": r"return \d+"})
    assert res.ok
    assert "src/main.py:2:     return 42" in res.text
    res = run(tb, "search_text", {"pattern": r"^line \d+$", "path": "notes.txt", "max_results": 3})
    assert res.ok and res.text.count("\n") == 3 and "stopped at 3" in res.text
    res = run(tb, "search_text", {"pattern": "RESULT 7", "path": "tool_results", "ignore_case": True})
    assert res.ok and "tool_results/abc123.txt:7: result 7" in res.text
    res = run(tb, "search_text", {"pattern": "main", "glob": "*.txt"})
    assert res.ok and "no matches" in res.text


def test_search_text_bad_regex(dirs: dict[str, Path]) -> None:
    res = run(box(dirs), "search_text", {"pattern": "(unclosed"})
    assert not res.ok and "invalid regular expression" in res.text


def test_search_text_skips_symlink_leaving_root(dirs: dict[str, Path]) -> None:
    os.symlink(dirs["outside"] / "secret.txt", dirs["ws"] / "link.txt")
    res = run(box(dirs), "search_text", {"pattern": "secret"})
    assert res.ok and "top secret" not in res.text


# ---------------------------------------------------------------------- confinement, every tool


def escapes(dirs: dict[str, Path]) -> dict[str, str]:
    os.symlink(dirs["outside"], dirs["ws"] / "escape_dir")
    os.symlink(dirs["outside"] / "secret.txt", dirs["ws"] / "escape_file")
    return {
        "dotdot": "../outside/secret.txt",
        "dotdot_nested": "src/../../outside",
        "absolute": str(dirs["outside"] / "secret.txt"),
        "etc": "/etc",
        "symlink_dir": "escape_dir/secret.txt",
        "symlink_file": "escape_file",
        "symlink_root": "escape_dir",
        "session_dotdot": "tool_results/../../outside/secret.txt",
    }


@pytest.mark.parametrize("tool", sorted(PATH_TOOLS))
def test_confinement_refuses_escapes(dirs: dict[str, Path], tool: str) -> None:
    tb = box(dirs, allow_write=True, approve=allow)
    for label, path in escapes(dirs).items():
        res = run(tb, tool, PATH_TOOLS[tool](path))
        assert not res.ok, f"{tool} accepted {label}: {res.text}"
        assert res.text.startswith("error:")
        assert "outside" in res.text, res.text
        assert "top secret" not in res.text
    assert (dirs["outside"] / "secret.txt").read_text() == "top secret\n"
    assert not (dirs["session"] / "history.jsonl").read_text().startswith("pwned")


@pytest.mark.parametrize("tool", sorted(PATH_TOOLS))
def test_confinement_messages_name_the_reason(dirs: dict[str, Path], tool: str) -> None:
    tb = box(dirs, allow_write=True, approve=allow)
    paths = escapes(dirs)
    assert "'..'" in run(tb, tool, PATH_TOOLS[tool](paths["dotdot"])).text
    assert "symbolic link" in run(tb, tool, PATH_TOOLS[tool](paths["symlink_file"])).text
    assert "is outside" in run(tb, tool, PATH_TOOLS[tool](paths["absolute"])).text


@pytest.mark.parametrize("tool", sorted(PATH_TOOLS))
def test_confinement_nul_and_long_paths(dirs: dict[str, Path], tool: str) -> None:
    tb = box(dirs, allow_write=True, approve=allow)
    res = run(tb, tool, PATH_TOOLS[tool]("notes.txt\x00.png"))
    assert not res.ok and "NUL byte" in res.text
    res = run(tb, tool, PATH_TOOLS[tool]("a/" * 600 + "x"))
    assert not res.ok and "too long" in res.text
    res = run(tb, tool, PATH_TOOLS[tool]("x" * 300))
    assert not res.ok and "longer than 255 bytes" in res.text


def test_inside_dotdot_and_inside_symlink_are_fine(dirs: dict[str, Path]) -> None:
    os.symlink(dirs["ws"] / "src", dirs["ws"] / "src_link")
    tb = box(dirs)
    assert run(tb, "read_file", {"path": "src/../notes.txt", "max_lines": 1}).ok
    assert run(tb, "read_file", {"path": "src_link/main.py"}).ok
    assert run(tb, "read_file", {"path": str(dirs["ws"] / "notes.txt"), "max_lines": 1}).ok


def test_run_shell_runs_in_workspace_only(dirs: dict[str, Path]) -> None:
    tb = box(dirs, allow_shell=True, approve=allow)
    res = run(tb, "run_shell", {"command": "pwd"})
    assert res.ok and res.text.splitlines() == ["exit code 0", str(dirs["ws"].resolve())]


# ---------------------------------------------------------------------- write / shell, approvals


def test_write_and_shell_disabled_by_default(dirs: dict[str, Path]) -> None:
    tb = box(dirs, approve=allow)
    res = run(tb, "write_file", {"path": "new.txt", "content": "x"})
    assert not res.ok and "disabled" in res.text
    assert not (dirs["ws"] / "new.txt").exists()
    res = run(tb, "run_shell", {"command": "touch made"})
    assert not res.ok and "disabled" in res.text
    assert not (dirs["ws"] / "made").exists()


def test_write_file_needs_approval(dirs: dict[str, Path]) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def deny(name: str, args: dict[str, Any]) -> bool:
        asked.append((name, args))
        return False

    res = run(box(dirs, allow_write=True, approve=deny), "write_file", {"path": "new.txt", "content": "x"})
    assert not res.ok and "did not approve" in res.text
    assert asked == [("write_file", {"path": "new.txt", "content": "x"})]
    assert not (dirs["ws"] / "new.txt").exists()
    res = run(box(dirs, allow_write=True), "write_file", {"path": "new.txt", "content": "x"})
    assert not res.ok and "approval" in res.text


def test_write_file_approved(dirs: dict[str, Path]) -> None:
    tb = box(dirs, allow_write=True, approve=allow)
    res = run(tb, "write_file", {"path": "out/new.txt", "content": "héllo\n"})
    assert res.ok and "created out/new.txt" in res.text
    assert (dirs["ws"] / "out" / "new.txt").read_text(encoding="utf-8") == "héllo\n"
    res = run(tb, "write_file", {"path": "out/new.txt", "content": "again"})
    assert res.ok and "overwrote" in res.text


def test_write_file_never_into_session_folders(dirs: dict[str, Path]) -> None:
    tb = box(dirs, allow_write=True, approve=allow)
    target = dirs["session"] / "tool_results" / "abc123.txt"
    res = run(tb, "write_file", {"path": str(target), "content": "gone"})
    assert not res.ok and "outside the workspace" in res.text
    assert target.read_text().startswith("result 1")


def test_run_shell_approved_output_and_exit_code(dirs: dict[str, Path]) -> None:
    tb = box(dirs, allow_shell=True, approve=allow)
    res = run(tb, "run_shell", {"command": "echo hi; echo err >&2; exit 3"})
    assert res.ok
    assert res.text.splitlines() == ["exit code 3", "hi", "err"]


def test_run_shell_timeout_kills(dirs: dict[str, Path]) -> None:
    tb = box(dirs, allow_shell=True, approve=allow)
    res = run(tb, "run_shell", {"command": "sleep 30", "timeout": 0.3})
    assert res.ok and "killed after 0.3 s" in res.text


@pytest.mark.asyncio
async def test_run_shell_cancel_kills_process(dirs: dict[str, Path]) -> None:
    tb = box(dirs, allow_shell=True, approve=allow)
    marker = dirs["ws"] / "late"
    task = asyncio.create_task(tb.run("run_shell", json.dumps({"command": f"sleep 1; touch {marker}"})))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(1.3)
    assert not marker.exists()


# ---------------------------------------------------------------------- argument errors


def test_bad_arguments_become_error_results(dirs: dict[str, Path]) -> None:
    tb = box(dirs)
    res = run(tb, "read_file", '{"path": "notes.txt"')
    assert not res.ok and "not valid JSON" in res.text
    res = run(tb, "read_file", "[1, 2]")
    assert not res.ok and "must be a JSON object" in res.text
    res = run(tb, "read_file", {"file": "notes.txt"})
    assert not res.ok and "unknown argument(s) file" in res.text
    res = run(tb, "read_file", {})
    assert not res.ok and "missing required argument(s) path" in res.text
    res = run(tb, "nope", {})
    assert not res.ok and "unknown tool 'nope'" in res.text and "read_file" in res.text
    res = run(tb, "read_file", {"path": 12})
    assert not res.ok and "'path' must be str" in res.text


def test_empty_arguments_mean_no_arguments(dirs: dict[str, Path]) -> None:
    assert parse_arguments("list_dir", "") == {}
    assert run(box(dirs), "list_dir", "").ok


def test_unexpected_exception_becomes_result(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    tb = box(dirs)

    def boom(*a: Any) -> str:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(files, "read_lines", boom)
    res = run(tb, "read_file", {"path": "notes.txt"})
    assert res == ToolResult("error: read_file failed: RuntimeError: disk on fire", False)


def test_symlink_loop_becomes_result(dirs: dict[str, Path]) -> None:
    os.symlink(dirs["ws"] / "loop_b", dirs["ws"] / "loop_a")
    os.symlink(dirs["ws"] / "loop_a", dirs["ws"] / "loop_b")
    tb = box(dirs)
    res = run(tb, "read_file", {"path": "loop_a"})
    assert not res.ok and res.text.startswith("error:") and "loop_a" in res.text
    res = run(tb, "list_dir", {})
    assert res.ok and "loop_a@ -> " in res.text
    assert run(tb, "search_text", {"pattern": "x"}).ok
