"""A small hand-written Claude Code session file in the 2.1.3xx shape (what 2.1.328 writes): the
request shape (system prompt and every tool definition, two of an MCP server ``github`` and one of
``slack``), ``api-request`` lines named by the assistant lines' ``requestRef``, injected ``attachment``
lines (a skill listing before the compaction, the date after it; both sent as system), ``cost-state``
lines (the agent's running cost), and a ``/compact`` whose boundary preserved the last answer and
names ``postTokens``.

It begins, as Claude Code's files do, with a ``queue-operation`` line. Figures a test can rely on:
3 calls; the agent's cost ends at :data:`TOTAL_USD` (per model :data:`MODEL`); compacting cost
:data:`COMPACT_USD`; :data:`POST_TOKENS` right after compacting, :data:`PRE_TOKENS` before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION = "5e55a0de-0000-4000-8000-000000000001"
MODEL = "claude-opus-4-6"
SHAPE = "shape-0001"
TOTAL_USD = 0.0912
BEFORE_USD = 0.0512
AFTER_USD = 0.0734
COMPACT_USD = round(AFTER_USD - BEFORE_USD, 10)
PRE_TOKENS = 7_000
POST_TOKENS = 1_500
SKILLS = "<system-reminder>\nThe following skills are available for use with the Skill tool:\n" + "\n".join(
    f"- skill-{i}: does thing number {i} for the user when asked to" for i in range(40)) + "\n</system-reminder>"
TOOLS: list[dict[str, Any]] = [
    {"name": "Bash", "description": "Run a shell command. " + "Mind the quoting and the timeout. " * 40,
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "Read", "description": "Read a file from the disk.",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
    {"name": "mcp__github__create_issue", "description": "Create an issue in a GitHub repository. " * 10,
     "input_schema": {"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}}}},
    {"name": "mcp__github__list_prs", "description": "List the pull requests of a repository.",
     "input_schema": {"type": "object", "properties": {"repo": {"type": "string"}}}},
    {"name": "mcp__slack__post", "description": "Post a message to a Slack channel. " * 5,
     "input_schema": {"type": "object", "properties": {"channel": {"type": "string"}, "text": {"type": "string"}}}},
]


def _ts(second: int) -> str:
    return f"2026-03-02T10:00:{second:02d}.000Z"


def _base(kind: str, uid: str, parent: str | None, second: int) -> dict[str, Any]:
    return {"parentUuid": parent, "isSidechain": False, "type": kind, "uuid": uid, "timestamp": _ts(second),
            "cwd": "/home/me/proj", "sessionId": SESSION, "version": "2.1.328", "userType": "external"}


def _user(uid: str, parent: str | None, second: int, content: Any, **extra: Any) -> dict[str, Any]:
    return {**_base("user", uid, parent, second), "message": {"role": "user", "content": content}, **extra}


def _assistant(uid: str, parent: str, second: int, request: str, content: list[dict[str, Any]],
               prompt: int) -> dict[str, Any]:
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": prompt - 210,
             "output_tokens": 40}
    return {**_base("assistant", uid, parent, second), "requestRef": request, "message": {
        "id": f"msg_{uid}", "type": "message", "role": "assistant", "model": MODEL, "content": content,
        "stop_reason": "end_turn", "usage": usage}}


def _request(rid: str, second: int) -> dict[str, Any]:
    return {"type": "api-request", "sessionId": SESSION, "id": rid, "timestamp": _ts(second), "version": "2.1.328",
            "shapeHash": SHAPE, "params": {"model": MODEL, "max_tokens": 32_000}}


def _cost(total: float, second: int) -> dict[str, Any]:
    return {"type": "cost-state", "sessionId": SESSION, "timestamp": _ts(second), "totalCostUSD": total,
            "modelUsage": {MODEL: {"inputTokens": 30, "outputTokens": 120, "cacheReadInputTokens": 9000,
                                   "cacheCreationInputTokens": 600, "costUSD": total}}}


def lines() -> list[dict[str, Any]]:
    """The file's records, in order."""
    return [
        {"type": "queue-operation", "operation": "enqueue", "timestamp": _ts(0), "sessionId": SESSION,
         "content": "Run the tests please"},
        {"type": "api-request-shape", "sessionId": SESSION, "shapeHash": SHAPE, "timestamp": _ts(0),
         "version": "2.1.328", "shape": {"system": [{"type": "text", "text": "You are a careful coding agent. " * 30}],
                                         "tools": TOOLS}},
        _user("u1", None, 1, "Run the tests please"),
        {**_base("attachment", "a1", "u1", 1), "attachment": {"type": "skill_listing"},
         "rendered": [{"content": SKILLS}], "renderedRole": "system"},
        _request("r1", 2),
        _assistant("as1", "a1", 2, "r1", [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                           "input": {"command": "pytest -q"}}], 5_000),
        _user("t1", "as1", 3, [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "12 passed"}]),
        _request("r2", 4),
        _assistant("as2", "t1", 4, "r2", [{"type": "text", "text": "All 12 tests pass."}], 5_400),
        _cost(BEFORE_USD, 5),
        {**_base("system", "b1", None, 6), "subtype": "compact_boundary", "logicalParentUuid": "as2",
         "content": "Conversation compacted", "compactMetadata": {
             "trigger": "manual", "preTokens": PRE_TOKENS, "postTokens": POST_TOKENS,
             "preservedMessages": {"anchorUuid": "as2", "uuids": ["as2"], "allUuids": ["as2"]}}},
        _user("s1", "b1", 6, "This session is being continued from a previous conversation.\nSummary:\n"
                             "1. The user asked to run the tests; all 12 pass.", isCompactSummary=True),
        _cost(AFTER_USD, 7),
        _user("u2", "s1", 8, "Thanks, now lint"),
        {**_base("attachment", "a2", "u2", 8), "attachment": {"type": "date", "date": "2026-03-02"},
         "rendered": [{"content": "<system-reminder>\nToday's date is 2026-03-02.\n</system-reminder>"}],
         "renderedRole": "system"},
        _request("r3", 9),
        _assistant("as3", "a2", 9, "r3", [{"type": "text", "text": "Lint is clean."}], 2_100),
        _cost(TOTAL_USD, 10),
    ]


def write_session(folder: Path, name: str = f"{SESSION}.jsonl") -> Path:
    """The session file in ``folder`` (made); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines()), encoding="utf-8")
    return path


def import_session(tmp: Path) -> Path:
    """The file written under ``tmp`` and imported; the session folder."""
    from engine.ingest import import_source

    folder = tmp / "imported"
    import_source(write_session(tmp / "src"), session_dir=folder, model_info=None)
    return folder
