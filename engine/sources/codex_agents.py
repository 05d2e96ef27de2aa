"""Codex subagents (``spawn_agent``, Codex 0.17x): each one a thread of its own, written to a rollout of its own.

The parent's rollout says which call started which thread (``event_msg`` ``item_completed`` of a
``SubAgentActivity``, ``kind`` ``started``: the call id, ``agent_thread_id``, ``agent_path``). The subagent's
rollout is ``rollout-<time>-<thread id>.jsonl``, in the parent's day folder (or another day's, when it started
after midnight); its ``session_meta`` names the parent (``parent_thread_id``, ``source.subagent.thread_spawn``).
Each is read as a :class:`SubagentRef` of the parent (``task``, linked to the call that started it, whose output
message gets ``subagent``); a subagent's own subagents are read with it, to :data:`MAX_DEPTH`. The task the parent
gave it and its answer are ``agent_message`` items (in the subagent's and in the parent's rollout).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from engine.sources.model import SourceError, SourceSession, SubagentRef, capped_lines, dict_at, open_regular

MAX_DEPTH = 8  # subagents of subagents read down to this depth (a deeper one is named, not read)
_THREAD_RE = re.compile(r"[0-9A-Za-z-]{8,64}")  # a thread id as Codex writes it (a UUID): safe in a file pattern


def child_rollout(parent: Path, thread_id: str) -> Path | None:
    """The rollout of thread ``thread_id``: beside ``parent``, else in another day folder of the same sessions
    folder (``sessions/YYYY/MM/DD``); None when it is not there."""
    if not _THREAD_RE.fullmatch(thread_id):
        return None
    pattern = f"rollout-*-{thread_id}.jsonl"
    beside = sorted(parent.parent.glob(pattern))
    if beside:
        return beside[0]
    root = parent.parents[3] if len(parent.parents) > 3 else None
    if root is None or root.name != "sessions":
        return None
    try:
        found = sorted(root.glob(f"*/*/*/{pattern}"))
    except OSError:
        return None
    return found[0] if found else None


def parent_thread(path: Path) -> str:
    """The parent thread a rollout's ``session_meta`` names ("" for a top-level session, or unreadable)."""
    try:
        with open_regular(path) as fh:
            for raw in capped_lines(fh, name=path.name):
                if b'"session_meta"' not in raw:
                    continue
                payload = dict_at(json.loads(raw), "payload")
                spawn = dict_at(dict_at(dict_at(payload, "source"), "subagent"), "thread_spawn")
                found = payload.get("parent_thread_id") or spawn.get("parent_thread_id")
                return found if isinstance(found, str) else ""
    except (OSError, SourceError, ValueError, RecursionError):
        return ""
    return ""


def _link(session: SourceSession, thread_id: str, call_id: str, agent_path: str) -> None:
    """Mark the output of the call that started the subagent."""
    for msg in session.messages:
        if msg.get("role") == "tool" and msg.get("tool_call_id") == call_id:
            msg["subagent"] = {"id": thread_id, "agent_path": agent_path}


ReadRollout = Callable[[Path, int], SourceSession]  # a rollout read whole, at a depth (engine.sources.codex)


def link_subagents(session: SourceSession, spawned: dict[str, tuple[str, str]], depth: int,
                   read: ReadRollout) -> None:
    """Read (with ``read``) the rollout of each subagent ``spawned`` started (call id -> (thread id, agent path))
    into ``session.subagents``; one that is missing, or whose rollout names another parent, is a note."""
    for call_id, (thread_id, agent_path) in spawned.items():
        path = child_rollout(session.path, thread_id)
        problem = ""
        if path is None:
            problem = f"the rollout of subagent {agent_path or thread_id} (thread {thread_id}) is missing"
        elif (named := parent_thread(path)) and named != session.session_id:
            problem = f"{path.name} names thread {named} as its parent, not this session"
        elif depth + 1 > MAX_DEPTH:
            problem = f"subagent {agent_path or thread_id} is nested deeper than {MAX_DEPTH}: not read"
        child = None
        if not problem and path is not None:
            try:
                child = read(path, depth + 1)
            except (OSError, SourceError) as exc:
                problem = f"the rollout of subagent {agent_path or thread_id} cannot be read: {exc}"
        if problem:
            session.notes.append(f"{problem} (started by call {call_id})")
        session.subagents.append(SubagentRef(thread_id, "task", path, call_id, child, problem))
        _link(session, thread_id, call_id, agent_path)


__all__ = ["MAX_DEPTH", "child_rollout", "link_subagents", "parent_thread"]
