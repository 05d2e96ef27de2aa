"""engine.context.digest and engine.context.digest_text: the facts come out exactly, on made-up calls of every agent
family and on the shared real sessions (Claude Code spans, mini-swe-agent trajectories); the text
is always a valid summary, reads back to the same facts, merges incrementally and is deterministic."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.claude_code_span import read_span
from engine.context.digest import (
    REQUEST_CHARS,
    SHELL_TOOLS,
    extract_facts,
    merge_facts,
    patch_files,
    result_status,
    shell_files,
)
from engine.context.digest_text import MAX_COMMANDS, build_digest, parse_digest, render_digest
from engine.context.summary_call import check_summary
from engine.context.turns import clean_cut_points
from engine.model.messages import Message, content_text

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
TRAJECTORIES = sorted((SHARED / "trajectories").glob("*.traj.json"))
CLAUDE = sorted((SHARED / "sessions" / "claude-code").glob("*.jsonl"))


def _traj(path: Path) -> list[Message]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [m for m in data["messages"] if m.get("role") in ("user", "assistant", "tool")]


def _claude_spans() -> list[tuple[str, list[Message]]]:
    out = []
    for p in CLAUDE:
        span = read_span(p)
        if span is not None:
            out.append((span.session, span.messages))
    return out


REAL = [(p.name, _traj(p)) for p in TRAJECTORIES] + _claude_spans()


T0 = "2026-03-01T10:00:00+00:00"
CODEX_OK = '{"output":"x","metadata":{"exit_code":0}}'
OPENHANDS_TRACEBACK = (
    'Traceback (most recent call last):\n  File "/repo/y.py", line 1\nNameError: name \'q\' is not defined\n'
    "[Command finished with exit code 1]"
)
CLAUDE_EDIT_ERROR = "<tool_use_error>String to replace not found</tool_use_error>"
HEREDOC = "cat <<'EOF' > fix.py\nprint('cat not_a_file.py')\nEOF\npython fix.py"


def _call(cid: str, name: str, args: Any) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def _step(cid: str, name: str, args: Any, result: str, ts: str = "2026-03-01T10:00:00+00:00") -> list[Message]:
    return [
        {"id": f"a{cid}", "ts": ts, "role": "assistant", "content": None, "tool_calls": [_call(cid, name, args)]},
        {"id": f"t{cid}", "ts": ts, "role": "tool", "tool_call_id": cid, "content": result},
    ]


def _lines(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip()


def _calls(messages: list[Message]) -> list[tuple[str, Any, str | None]]:
    """(tool name, parsed arguments, result) for every tool call, computed here, not by the digest."""
    results = {str(m.get("tool_call_id")): content_text(m.get("content")) for m in messages if m.get("role") == "tool"}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or ():
            fn = c.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "")
            except ValueError:
                args = fn.get("arguments")
            out.append((str(fn.get("name")), args, results.get(str(c.get("id")))))
    return out


# --------------------------------------------------------------------------- every agent family


def test_files_of_every_agent_family() -> None:
    patch = "*** Begin Patch\n*** Add File: src/new.py\n+x = 1\n*** Update File: src/old.py\n@@\n-a\n+b\n" \
            "*** Delete File: src/gone.py\n*** End Patch"
    msgs = [
        {"id": "u1", "ts": T0, "role": "user", "content": "Fix the parser. Do not touch the tests."},
        *_step("1", "read_file", {"path": "engine/a.py"}, "1: x"),  # ours
        *_step("2", "write_file", {"path": "engine/b.py", "content": "x"}, "created engine/b.py (1 bytes)"),
        *_step("3", "write_file", {"path": "engine/a.py", "content": "y"}, "overwrote engine/a.py (1 bytes)"),
        *_step("4", "run_shell", {"command": "pytest -q tests/test_a.py"}, "exit code 1\nE   AssertionError: 2 != 3"),
        *_step("5", "Read", {"file_path": "/w/lib/c.ex"}, "     1→defmodule C"),  # Claude Code
        *_step("6", "Edit", {"file_path": "/w/lib/c.ex", "old_string": "a", "new_string": "b"}, "The file was updated"),
        *_step("7", "MultiEdit", {"file_path": "/w/lib/d.ex", "edits": []}, "Applied 2 edits"),
        *_step("8", "Write", {"file_path": "/w/lib/e.ex", "content": ""}, "File created successfully at: x"),
        *_step("9", "NotebookEdit", {"notebook_path": "/w/n.ipynb", "new_source": ""}, "Updated cell"),
        *_step("10", "Grep", {"pattern": "x", "path": "/w/lib/c.ex"}, "3:x"),
        *_step("11", "Glob", {"pattern": "**/*.ex"}, "/w/lib/c.ex"),  # a pattern, no file
        *_step("12", "Bash", {"command": "cat /w/mix.exs && sed -n '1,20p' /w/lib/f.ex"}, "ok"),
        *_step("13", "apply_patch", {"input": patch}, "Done"),  # Codex
        *_step("14", "shell", {"command": ["bash", "-lc", "head -5 README.md"]}, CODEX_OK),
        *_step("15", "str_replace_editor", {"command": "view", "path": "/repo/x.py"}, "x"),  # OpenHands
        *_step("16", "str_replace_editor", {"command": "create", "path": "/repo/y.py"}, "File created"),
        *_step("17", "str_replace_editor", {"command": "str_replace", "path": "/repo/x.py"}, "edited"),
        *_step("18", "execute_bash", {"command": "python /repo/y.py"}, OPENHANDS_TRACEBACK),
        *_step("19", "bash", {"command": HEREDOC}, "<returncode>0</returncode>\n<output>\n</output>"),
        *_step("20", "run_shell", {"command": "pytest -q tests/test_a.py"}, "exit code 0\n1 passed"),
        *_step("21", "Edit", {"file_path": "/w/lib/g.ex"}, CLAUDE_EDIT_ERROR),
        {"id": "a21", "ts": T0, "role": "assistant", "content": "The parser works. Next I will run the whole suite."},
    ]
    f = extract_facts(msgs)
    files = {p: (ff.last, dict(ff.actions)) for p, ff in f.files.items()}
    assert files == {
        "engine/a.py": ("written", {"read": 1, "written": 1}),
        "engine/b.py": ("created", {"created": 1}),
        "/w/lib/c.ex": ("searched", {"read": 1, "edited": 1, "searched": 1}),
        "/w/lib/d.ex": ("edited", {"edited": 1}),
        "/w/lib/e.ex": ("created", {"created": 1}),
        "/w/n.ipynb": ("edited", {"edited": 1}),
        "/w/mix.exs": ("read", {"read": 1}),
        "/w/lib/f.ex": ("read", {"read": 1}),
        "src/new.py": ("created", {"created": 1}),
        "src/old.py": ("edited", {"edited": 1}),
        "src/gone.py": ("deleted", {"deleted": 1}),
        "README.md": ("read", {"read": 1}),
        "/repo/x.py": ("edited", {"read": 1, "edited": 1}),
        "/repo/y.py": ("created", {"created": 1}),
        "fix.py": ("written", {"written": 1}),
        "/w/lib/g.ex": ("edited (failed)", {"edited (failed)": 1}),
    }
    assert not f.files["/w/lib/g.ex"].changed
    cmds = {c.command: (c.runs, c.status) for c in f.commands.values()}
    assert cmds == {
        "pytest -q tests/test_a.py": (2, "exit 0"),
        "cat /w/mix.exs && sed -n '1,20p' /w/lib/f.ex": (1, "ok"),
        "head -5 README.md": (1, "exit 0"),
        "python /repo/y.py": (1, "exit 1"),
        "cat <<'EOF' > fix.py python fix.py [here-document: 2 lines]": (1, "exit 0"),
    }
    errors = {(e.key, e.text, e.got_past) for e in f.errors}
    assert errors == {
        ("pytest", "E AssertionError: 2 != 3", True),  # the same command passed later
        ("python y.py", "NameError: name 'q' is not defined", False),
        ("Edit /w/lib/g.ex", "String to replace not found", False),
    }
    assert [r.text for r in f.requests] == ["Fix the parser. Do not touch the tests."]
    assert f.constraints == ["Do not touch the tests."]
    assert f.intent == "The parser works. Next I will run the whole suite."
    assert f.next_step == "Next I will run the whole suite."
    assert f.archive == {"2026-03-01": len(msgs)} and f.tool_calls == 21
    text = render_digest(f)
    assert check_summary(text) == (True, "")
    assert "- [python y.py] NameError: name 'q' is not defined" in text.split("## Key Decisions")[0]
    done = text.split("### Done")[1].split("### In Progress")[0]
    assert "/w/lib/e.ex" in done and "/w/lib/g.ex" not in done  # a failed edit changed nothing


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat a.py b/c.txt | grep x > out.log 2>&1", [("a.py", "read"), ("b/c.txt", "read"), ("out.log", "written")]),
        ("sed -i 's/a/b/' src/x.py", [("src/x.py", "edited")]),
        ("sed -n '10,20p' src/x.py", [("src/x.py", "read")]),
        ("nano notes.md; touch new.txt; rm -f old.txt",
         [("notes.md", "edited"), ("new.txt", "created"), ("old.txt", "deleted")]),
        ("cat *.py $HOME/x.py /dev/null", []),  # globs, variables and devices are not files
        ("python -c 'print(1)'; ls src/", []),
        ("echo 'unbalanced", []),
        ("FOO=1 tee -a log.txt < input.csv", [("input.csv", "read"), ("log.txt", "written")]),
    ],
)
def test_shell_files_are_conservative(command: str, expected: list[tuple[str, str]]) -> None:
    assert shell_files(command) == expected


def test_patch_files_and_result_status() -> None:
    assert patch_files("*** Update File: a.py\n*** Move to: b.py\n") == [("a.py", "edited"), ("b.py", "created")]
    assert result_status("run_shell", None) == ("no result", "")
    assert result_status("run_shell", "killed after 5 s (timeout)\n")[0] == "killed (timeout)"
    assert result_status("Bash", "Exit code 128\nfatal: not a git repository")[1] == "fatal: not a git repository"
    assert result_status("Edit", "<tool_use_error>String not found</tool_use_error>") == ("error", "String not found")
    assert result_status("read_file", "error: read_file: no such file") == ("error", "error: read_file: no such file")
    assert result_status("bash", "<returncode>0</returncode>\n<output>\nok\n</output>") == ("exit 0", "")


# --------------------------------------------------------------------------- real sessions


@pytest.mark.parametrize(("name", "messages"), REAL, ids=[n for n, _ in REAL])
def test_real_files_equal_what_the_tool_calls_name(name: str, messages: list[Message]) -> None:
    facts = extract_facts(messages)
    calls = _calls(messages)
    assert facts.tool_calls == len(calls)
    structured: Counter[tuple[str, str]] = Counter()
    shell_text = []
    for tool, args, _ in calls:
        if tool in ("Read", "Edit", "MultiEdit", "Write", "NotebookEdit") and isinstance(args, dict):
            verb = "read" if tool == "Read" else "changed"
            structured[(args.get("file_path") or args.get("notebook_path"), verb)] += 1
        elif tool in SHELL_TOOLS and isinstance(args, dict):
            shell_text.append(str(args.get("command")))
    # every file a file tool names is there, with exactly as many edits/writes as the calls made
    for (path, verb), n in structured.items():
        ff = facts.files[path]
        if verb == "changed":
            assert sum(v for k, v in ff.actions.items() if k in ("edited", "created", "written")) == n + sum(
                1 for c in shell_text if path in c and re.search(r"sed -i|>|tee ", c)
            )
        else:
            assert ff.actions.get("read", 0) >= n
    # and every other file comes from a shell command (or a Grep path) that names it word for word
    named = {p for p, _ in structured}
    grep_paths = {a.get("path") for t, a, _ in calls if t in ("Grep", "search_text") and isinstance(a, dict)}
    for path in set(facts.files) - named:
        assert path in grep_paths or any(path in c for c in shell_text), path


@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name for p in TRAJECTORIES])
def test_trajectory_commands_and_exit_codes(path: Path) -> None:
    messages = _traj(path)
    facts = extract_facts(messages)
    calls = _calls(messages)
    assert sum(c.runs for c in facts.commands.values()) == len(calls)  # every bash call is one run
    last: dict[str, str] = {}
    for _, args, result in calls:
        m = re.search(r"<returncode>(-?\d+)</returncode>", result or "")
        cmd = " ".join(str(args["command"]).split())
        last[cmd] = f"exit {m.group(1)}" if m else "no result"
    shown = {" ".join(c.command.split()) : c.status for c in facts.commands.values()}
    for cmd, status in last.items():
        if "<<" not in cmd and len(cmd) < 190:
            assert shown[cmd] == status, cmd
    failed = {" ".join(str(a["command"]).split()) for _, a, r in calls if re.search(r"<returncode>[1-9]", r or "")}
    assert bool(failed) == bool(facts.errors)


@pytest.mark.parametrize(("name", "messages"), REAL, ids=[n for n, _ in REAL])
def test_real_requests_word_for_word_and_valid(name: str, messages: list[Message]) -> None:
    text = build_digest(messages)
    assert check_summary(text) == (True, "")
    facts = parse_digest(text)
    users = [content_text(m.get("content")).strip() for m in messages if m.get("role") == "user"]
    users = [u for u in users if u]
    # word for word (line ends aside: the Markdown keeps no trailing blanks or carriage returns)
    assert [r.text for r in facts.requests] == [_lines(u[:REQUEST_CHARS].rstrip()) for u in users]
    for r, u in zip(facts.requests, users, strict=True):
        assert r.cut == (len(u) > REQUEST_CHARS) and r.chars == len(u)
    assert build_digest(messages) == text  # deterministic
    assert render_digest(parse_digest(text)) == text  # reads back to the same facts


# --------------------------------------------------------------------------- incremental


def _clean_split(messages: list[Message], at: float) -> int:
    ok = clean_cut_points(messages)
    return max(i for i in range(1, int(len(messages) * at) + 1) if ok[i])


@pytest.mark.parametrize(("name", "messages"), REAL, ids=[n for n, _ in REAL])
def test_incremental_merge_equals_one_digest(name: str, messages: list[Message]) -> None:
    cut = _clean_split(messages, 0.5)
    first = build_digest(messages[:cut])
    second = build_digest(messages[cut:], first)
    whole = build_digest(messages)
    f2, fw = parse_digest(second), parse_digest(whole)
    assert [r.text for r in f2.requests] == [r.text for r in fw.requests]  # oldest kept, none twice
    assert {p: ff.actions for p, ff in f2.files.items()} == {p: ff.actions for p, ff in fw.files.items()}
    assert [(e.key, e.text, e.got_past) for e in f2.errors] == [(e.key, e.text, e.got_past) for e in fw.errors]
    assert f2.archive == fw.archive and f2.messages == fw.messages == len(messages)
    if len(extract_facts(messages).commands) <= MAX_COMMANDS:
        assert second == whole
    # a third compaction of nothing new changes nothing
    assert build_digest([], second) == render_digest(parse_digest(second))


def test_merge_keeps_the_oldest_requests_without_duplicates() -> None:
    a = [{"id": "1", "ts": "2026-01-01T10:00:00+00:00", "role": "user", "content": "first"},
         {"id": "2", "ts": "2026-01-01T10:05:00+00:00", "role": "user", "content": "x" * (REQUEST_CHARS + 5)}]
    b = [{"id": "3", "ts": "2026-01-02T08:00:00+00:00", "role": "user", "content": "second"}]
    once = build_digest(b, build_digest(a))
    twice = build_digest([], once)
    facts = parse_digest(twice)
    assert [r.text[:6] for r in facts.requests] == ["first", "x" * 6, "second"]
    assert facts.requests[1].cut and facts.requests[1].msg_id == "2" and facts.requests[1].day == "2026-01-01"
    assert "dialog/2026-01-01.jsonl, message 2)" in twice
    assert facts.archive == {"2026-01-01": 2, "2026-01-02": 1}
    merged = merge_facts(parse_digest(once), extract_facts(a))  # the same span again: nothing twice
    assert [r.text[:6] for r in merged.requests] == ["first", "x" * 6, "second"]


def test_earlier_text_that_is_not_a_digest_is_kept() -> None:
    earlier = "## Goal\nShip v2.\n\n## Next Steps\n1. tag the release\n\n[3 older messages left the context]"
    text = build_digest([{"id": "1", "ts": "2026-01-01T10:00:00+00:00", "role": "user", "content": "go on"}], earlier)
    assert check_summary(text)[0]
    notes = text.split("### Earlier notes (kept as written)\n", 1)[1]
    assert notes.splitlines() == ["**Goal**", "Ship v2.", "**Next Steps**", "1. tag the release",
                                  "[3 older messages left the context]"]
    assert parse_digest(text).requests[0].text == "go on"  # the old "1. tag the release" is no request
    assert build_digest([], text) == text


def test_narrative_is_kept_in_digest_mode_and_left_to_the_model_otherwise() -> None:
    base = build_digest([{"id": "1", "ts": "2026-01-01T10:00:00+00:00", "role": "user", "content": "go"}])
    both = base + "\n\n## Narrative (written by m)\nWe chose SQLite because it is local."
    assert "We chose SQLite because it is local." in build_digest([], both, keep_narrative=True)
    assert "SQLite" not in build_digest([], both, keep_narrative=False)


def test_empty_and_odd_messages() -> None:
    text = build_digest([])
    assert check_summary(text)[0] and "No request from the user" in text
    bad_call = {"id": "", "function": {"name": "Read", "arguments": "{bad"}}
    odd = [{"role": "assistant", "content": None, "tool_calls": [bad_call]},
           {"role": "tool", "tool_call_id": "zzz", "content": [{"type": "text", "text": "orphan"}]},
           {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:"}}]},
           {"role": "system", "content": "ignored"}]
    f = extract_facts(odd)
    assert f.files == {} and f.requests == [] and f.tool_calls == 1
    assert check_summary(render_digest(f))[0]


@pytest.mark.parametrize(("name", "messages"), REAL, ids=[n for n, _ in REAL])
def test_tighter_lists_to_fit_keep_every_request_and_changed_file(name: str, messages: list[Message]) -> None:
    facts = extract_facts(messages)
    full = render_digest(facts)
    small = render_digest(facts, max_chars=len(full) // 3)
    assert check_summary(small)[0] and len(small) < len(full)
    back = parse_digest(small)
    assert len(back.requests) == len(facts.requests)
    assert {p for p, ff in back.files.items() if ff.changed} == {p for p, ff in facts.files.items() if ff.changed}
    assert set(back.files) == set(facts.files)  # files only read are kept too, as paths
    assert [e.text for e in back.errors if not e.got_past] == [e.text for e in facts.errors if not e.got_past]
    assert render_digest(facts, max_chars=10**9) == full
