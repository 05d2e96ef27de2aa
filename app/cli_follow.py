"""``ctxbench follow PATH [--new-only] [--format NAME] [--interval S]``: a growing session file's provider
calls as JSON lines, for scripts and status lines (the engine's :class:`engine.sources.follow.Follower`).

PATH: a session file of a format followed by appending or rewriting (Claude Code, Codex, Gemini CLI, Pi, …: the
formats :data:`engine.sources.follow.FOLLOWED` names, which the help lists), or an OpenCode or Kilo session
``<…>/opencode.db#ses_…`` (the database alone: its most recent top-level session; its rows are polled, read-only).

Each line has a ``"type"``:

- ``call``: one provider call, printed once, with the fields of the ``events.jsonl`` context record:
  ``index``, ``provider_prompt_tokens`` (the whole prompt, cached part included), ``cache_read_tokens``,
  ``cache_write_tokens`` (null where the agent records none: Codex, Gemini CLI), ``completion_tokens``,
  ``reasoning_tokens``, ``window``, ``model``, ``ts``, ``request_id``, and ``used_ratio`` (prompt /
  window);
- ``call_update``: a printed call whose figures grew (a Claude Code response's later lines carry its
  final output tokens; Gemini CLI writes a response's record again as it grows); the same fields, the same
  ``index``;
- ``compaction``: ``index``, ``trigger`` (auto | manual | unknown), ``trigger_source``,
  ``tokens_before``, ``tokens_after`` (null until the first call after it), ``calls_before``, ``ts``;
  ``compaction_update`` when ``tokens_after`` becomes known;
- ``reset``: the file was truncated, replaced or rewritten (``reason``; an OpenCode session whose rows were
  deleted, a revert: ``rewritten``); what follows is read from its start, with indices from 0 again;
- ``missing``: the file was deleted, or something that is not a regular file (a FIFO, a device) is at its path now
  (``reason``): printed once; following goes on, and when the file is back it is read from its start (a
  ``reset``). An OpenCode database that was removed is ``missing`` too;
- ``problem``: an OpenCode database that cannot be read now (``reason``, naming it: damaged, a table or column
  missing, or locked by another process for 5 s); printed once per problem; following goes on.

First what the file holds (unless ``--new-only``), then what is appended, polled every ``--interval``
seconds (0.2). SIGINT and SIGTERM end it with status 0.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from typing import Any

from engine.sources import formats
from engine.sources.follow import FOLLOWED, POLL_INTERVAL, POLLED, FollowEvent


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "follow",
        help="print a growing session's provider calls and compactions as JSON lines "
             f"({formats.spoken_list(FOLLOWED, 'or')})",
    )
    p.add_argument("path", type=Path, metavar="PATH",
                   help="the session file the agent is writing, or a session in a database "
                   f"({formats.spoken_list(POLLED, 'or')}): <db>#ses_…")
    p.add_argument("--new-only", action="store_true", help="skip what the file already holds")
    p.add_argument("--format", metavar="NAME",
                   help=f"{', '.join(FOLLOWED)} (default: detected)")
    p.add_argument("--interval", type=float, default=POLL_INTERVAL, metavar="S",
                   help=f"seconds between two looks at the file (default {POLL_INTERVAL})")


def event_json(event: FollowEvent) -> dict[str, Any]:
    """The JSON line of one follow event."""
    if event.call is not None:
        c = event.call
        ratio = round(c.prompt_tokens / c.window, 4) if c.prompt_tokens is not None and c.window else None
        return {
            "type": event.kind, "index": c.index, "provider_prompt_tokens": c.prompt_tokens,
            "cache_read_tokens": c.cache_read_tokens, "cache_write_tokens": c.cache_write_tokens,
            "completion_tokens": c.completion_tokens, "reasoning_tokens": c.reasoning_tokens, "window": c.window,
            "model": c.model, "ts": c.ts, "request_id": c.request_id, "used_ratio": ratio,
        }
    if event.compaction is not None:
        k = event.compaction
        return {
            "type": event.kind, "index": k.index, "trigger": k.trigger, "trigger_source": k.trigger_source,
            "tokens_before": k.tokens_before, "tokens_after": k.tokens_after, "calls_before": k.calls_before,
            "ts": k.ts,
        }
    return {"type": event.kind, "reason": event.reason}


class FollowUsageError(Exception):
    """A bad argument (exit code 2); any other problem is an engine SourceError (exit code 1)."""


def cmd_follow(args: argparse.Namespace, out: Any) -> int:
    """Follow until SIGINT or SIGTERM (status 0). ``out`` prints one JSON object per line, flushed.

    Raises :class:`FollowUsageError` for bad arguments, SourceError when the file cannot be followed."""
    from engine.sources.detect import parse_format
    from engine.sources.follow import Follower
    from engine.sources.model import SourceError
    from engine.sources.opencode import split_path

    if args.interval <= 0:
        raise FollowUsageError(f"--interval must be positive, got {args.interval}")
    try:
        fmt = parse_format(args.format) if args.format else None
        follower = Follower(args.path, fmt, new_only=args.new_only)
    except SourceError as exc:
        raise FollowUsageError(str(exc)) from None
    if not split_path(args.path)[0].exists():  # an OpenCode session: its database
        raise SourceError(f"no file at {args.path}")
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stopping:
            for event in follower.poll():
                out(event_json(event))
            if getattr(out, "closed", False):
                break  # the reader went away (a closed pipe)
            if not stopping:
                time.sleep(args.interval)  # a signal ends the sleep early (its handler runs, then the loop stops)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
