"""An agent's own session joined with a capture of the recording proxy that holds the same calls: the calls take
the exact system prompt and tool definitions of the requests the capture recorded (``prefix_source`` *file*)
instead of the size the importer would infer — what Gemini CLI and OpenCode, whose files keep neither, need.

A call of the session and a call of the capture are the same call when

- both carry a response id and the ids are equal, or
- their usage is identical (prompt, output and, where both have it, cache read tokens) and so is the model where
  both name one, in the order the calls came, and the clocks agree: the agent's time of each call less the
  capture's is the same for every pair, give or take :data:`CLOCK_SLACK` seconds (an agent whose clock is shifted
  or whose timestamps are in another zone still matches; a coincidence of usage at another moment does not).

The session is joined only when every call that reports usage is found (all or nothing: a call with the exact
prefix next to one with an inferred prefix would be two measures in one chart); a note says which capture and how
many calls. :class:`CaptureJoin` keeps the captures' readers between two looks, so that a followed session is joined
as it grows (the capture's line is written before the agent receives the end of its answer: before the agent's own
file can hold the call).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from engine.sources.capture import CaptureReader
from engine.sources.model import LineBuffer, ProviderCall, RequestPrefix, SourceSession, open_regular

CLOCK_SLACK = 120.0  # seconds the agent's and the proxy's times of a call may differ from the pairs' median offset
NEAR_DAYS = 2.0  # captures last written this close to the agent's file (days) are looked at
MAX_CAPTURES = 12  # the most recently written of them
PREFIX = "capture:"  # the join's prefix keys: capture:<capture's key>


@dataclass
class _Followed:
    reader: CaptureReader
    offset: int = 0
    inode: int = 0


def _seconds(ts: str) -> float | None:
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() if ts else None
    except ValueError:
        return None


def _same_usage(a: ProviderCall, b: ProviderCall) -> bool:
    if a.prompt_tokens is None or a.prompt_tokens != b.prompt_tokens or a.completion_tokens != b.completion_tokens:
        return False
    reads = (a.cache_read_tokens, b.cache_read_tokens)
    if None not in reads and reads[0] != reads[1]:
        return False
    model_a, model_b = a.model.removeprefix("models/"), b.model.removeprefix("models/")
    return not (model_a and model_b and model_a != model_b)


def match_calls(calls: Sequence[ProviderCall], recorded: Sequence[ProviderCall]) -> dict[int, ProviderCall]:
    """The capture's call of each call of the session found in it (see the module docstring), by the call's
    position in ``calls``."""
    by_id = {c.request_id: c for c in recorded if c.request_id}
    found: dict[int, ProviderCall] = {}
    used: set[int] = set()
    for i, call in enumerate(calls):
        same = by_id.get(call.request_id) if call.request_id else None
        if same is not None and id(same) not in used:
            found[i] = same
            used.add(id(same))
    pairs: list[tuple[int, ProviderCall]] = []
    at = 0
    for i, call in enumerate(calls):
        if i in found or call.prompt_tokens is None:
            continue
        for j in range(at, len(recorded)):
            if id(recorded[j]) not in used and _same_usage(call, recorded[j]):
                pairs.append((i, recorded[j]))
                at = j + 1
                break
    offsets = [(s - r) for i, c in pairs if (s := _seconds(calls[i].ts)) is not None
               and (r := _seconds(c.ts)) is not None]
    middle = statistics.median(offsets) if offsets else 0.0
    for i, c in pairs:
        s, r = _seconds(calls[i].ts), _seconds(c.ts)
        if s is None or r is None or abs((s - r) - middle) <= CLOCK_SLACK:
            found[i] = c
    return found


@dataclass
class JoinResult:
    capture: Path | None = None
    matched: int = 0
    reported: int = 0  # the session's calls that report usage
    note: str = ""


@dataclass
class CaptureJoin:
    """The captures near a session's file, read incrementally between looks (see the module docstring)."""

    folder: Path
    followed: dict[Path, _Followed] = field(default_factory=dict)

    def candidates(self, near: float | None) -> list[Path]:
        """The captures (first parts) written within :data:`NEAR_DAYS` of ``near`` (a time in seconds; None: any),
        most recent first, at most :data:`MAX_CAPTURES`."""
        try:
            found = [(p.stat().st_mtime, p) for p in self.folder.glob("capture-*.jsonl")]
        except OSError:
            return []
        if near is not None:
            found = [(t, p) for t, p in found if abs(t - near) <= NEAR_DAYS * 86400]
        found.sort(reverse=True)
        return [p for _, p in found[:MAX_CAPTURES]]

    def _session_of(self, path: Path) -> SourceSession | None:
        """The capture at ``path`` read up to its end (what was appended since the last look fed to its reader)."""
        kept = self.followed.get(path)
        try:
            with open_regular(path) as fh:
                st = os.fstat(fh.fileno())
                if kept is None or kept.inode != st.st_ino or st.st_size < kept.offset:
                    kept = _Followed(CaptureReader(path), 0, st.st_ino)
                    self.followed[path] = kept
                fh.seek(kept.offset)
                data = fh.read()
        except OSError:
            return None
        end = data.rfind(b"\n") + 1  # complete lines only: the proxy writes a line whole
        if end:
            kept.reader.feed_lines(LineBuffer().lines(data[:end]))
            kept.offset += end
        return kept.reader.session

    def apply(self, src: SourceSession, near: float | None = None) -> JoinResult:
        """Join ``src`` with the capture that holds all its reported calls (the first found, most recent first); the
        calls' ``prefix_key`` and ``src.prefixes`` set, and a note, when one does. Calls that already have their
        exact prefix from the agent's own file (Claude Code, Codex; a capture itself) are left as they are."""
        reported = [c for c in src.calls if c.prompt_tokens is not None]
        result = JoinResult(reported=len(reported))
        if not reported or any(c.prefix_key and not c.prefix_key.startswith(
                PREFIX) for c in src.calls):
            return result
        best: tuple[int, Path, dict[int, ProviderCall], SourceSession] | None = None
        for path in self.candidates(near):
            capture = self._session_of(path)
            if capture is None or not capture.calls:
                continue
            found = match_calls(src.calls, capture.calls)
            if found and (best is None or len(found) > best[0]):
                best = (len(found), path, found, capture)
            if len(found) >= len(reported):
                break
        if best is None:
            return result
        _, path, found, capture = best
        result.capture, result.matched = path, sum(1 for i in found if src.calls[i].prompt_tokens is not None)
        if result.matched < len(reported):
            result.note = (f"{result.matched} of {len(reported)} calls found in the capture {path.name}: not joined "
                           "(the system prompt and tool definitions stay inferred)")
            return result
        for i, recorded in found.items():
            exact = capture.prefixes.get(recorded.prefix_key)
            if exact is None:
                continue
            key = PREFIX + exact.key
            src.prefixes.setdefault(key, RequestPrefix(key=key, system=exact.system, tools=list(exact.tools)))
            call = src.calls[i]
            call.prefix_key = key
            if call.max_tokens is None:
                call.max_tokens = recorded.max_tokens
        result.note = (f"system prompt and tool definitions exact from the capture {path.name} "
                       f"({result.matched} calls joined by their usage and time, or response id)")
        if src.prefix_label:
            src.prefix_label = ""
        if result.note not in src.notes:
            src.notes = [n for n in src.notes if not n.startswith("system prompt and tool definitions exact from")]
            src.notes.append(result.note)
        return result


def join_captures(src: SourceSession, folder: Path | None = None) -> JoinResult:
    """``src`` joined with the recording proxy's captures in ``folder`` (``<data dir>/captures``), once."""
    from engine.capture.files import captures_dir

    return CaptureJoin(folder or captures_dir()).apply(src, written(src.path))


def written(path: Path) -> float | None:
    """When the session's file was last written (an OpenCode session ``<db>#<id>``: its database), None if unknown."""
    try:
        return Path(str(path).split("#", 1)[0]).stat().st_mtime
    except OSError:
        return None


__all__ = ["CLOCK_SLACK", "CaptureJoin", "JoinResult", "join_captures", "match_calls", "written"]
