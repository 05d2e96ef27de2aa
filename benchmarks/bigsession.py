"""Large Claude Code sessions made from a real one, for the benchmarks (issue 20).

A large session is *not* a real session's lines repeated: the readers recognise a line they have seen
(same ``uuid``, same ``message.id`` + ``requestId``) and the repeats collapse into the original
conversation, so a "100 MB" file would hold 3 MB of conversation. Here each copy of the real session's
lines gets:

- fresh ``uuid``s (every UUID in the copy except the ``sessionId``, consistently within the copy, so
  ``parentUuid``, ``logicalParentUuid`` of a ``compact_boundary``, ``sourceToolAssistantUUID``,
  ``messageId`` of a ``file-history-snapshot`` … stay linked inside it);
- fresh ``msg_…`` (``message.id``), ``req_…`` (``requestId``) and ``toolu_…`` (tool call ids, in the
  ``tool_use`` blocks and the ``tool_result`` blocks that answer them) ids of the same length;
- its chain continued: the copy's root line (the first one with ``parentUuid: null`` that is not a
  ``compact_boundary``) names the previous copy's last line on the main chain as its parent, so the
  whole file is one conversation;
- timestamps moved on by the copies before it (every ``"timestamp":"…"``), so they increase;
- ``sessionId`` unchanged.

Copy 0 is the real session as it is. Deterministic for a given ``seed``. A file is cut at a line
boundary once it reaches ``size_bytes`` (its last copy is partial: a session in the middle of a turn).

Codex rollouts (``make_codex_session``, :class:`CodexCopies`): a rollout's lines copied with fresh
``call_id``s and turn ids, timestamps moved on, the running ``total_token_usage`` carried on across
copies (a call is a ``token_count`` whose total changed) and ``session_meta`` written once.

``python -m benchmarks.bigsession DEST SIZE_MB [SEED]`` writes a Claude Code one.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data" / "sessions"
CLAUDE_SOURCE = SHARED / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CODEX_SOURCE = SHARED / "codex" / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"

_IDS = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                  rb"|(?:msg|req|toolu)_[A-Za-z0-9]{16,}"
                  rb'|"timestamp":"[0-9T:.\-]+Z"')
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_NULL_PARENT = b'"parentUuid":null'


def _parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _fmt_ts(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


class ClaudeCopies:
    """The lines of ``source`` copied without end, each copy with fresh ids (see the module docstring)."""

    def __init__(self, source: Path = CLAUDE_SOURCE, seed: int = 0) -> None:
        self.source = Path(source)
        self.rng = random.Random(seed)
        self.lines = self.source.read_bytes().splitlines(keepends=True)
        self.session_id = b""
        self.root = -1  # index of the copy's root line
        self.tip = b""  # the uuid of the copy's last line on the main chain (in the original)
        stamps: list[datetime] = []
        for i, raw in enumerate(self.lines):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            if not self.session_id and isinstance(obj.get("sessionId"), str):
                self.session_id = obj["sessionId"].encode()
            if isinstance(obj.get("timestamp"), str):
                stamps.append(_parse_ts(obj["timestamp"]))
            uid = obj.get("uuid")
            if not isinstance(uid, str):
                continue
            if self.root < 0 and obj.get("parentUuid") is None and obj.get("subtype") != "compact_boundary":
                self.root = i
            if not obj.get("isSidechain"):
                self.tip = uid.encode()
        if self.root < 0 or not self.tip:
            raise ValueError(f"{self.source}: no conversation chain found")
        self.span = (max(stamps) - min(stamps) + timedelta(seconds=60)) if stamps else timedelta(hours=1)
        self.copies = 0
        self._last_tip = b""

    def _fresh(self, old: bytes) -> bytes:
        if old[:1] in b"mrt" and b"_" in old:  # msg_… req_… toolu_…
            prefix, _, rest = old.partition(b"_")
            keep = 2 if rest[:2] == b"01" else 0  # msg_01…, toolu_01…, req_011C…: keep the shape
            tail = "".join(self.rng.choice(_ALNUM) for _ in range(len(rest) - keep))
            return prefix + b"_" + rest[:keep] + tail.encode()
        return b"%08x-%04x-4%03x-%04x-%012x" % (
            self.rng.getrandbits(32), self.rng.getrandbits(16), self.rng.getrandbits(12),
            0x8000 | self.rng.getrandbits(14), self.rng.getrandbits(48))

    def copy(self) -> list[bytes]:
        """The next copy's lines."""
        k = self.copies
        self.copies += 1
        if k == 0:
            self._last_tip = self.tip
            return list(self.lines)
        mapping: dict[bytes, bytes] = {self.session_id: self.session_id}
        shift = self.span * k

        def sub(m: re.Match[bytes]) -> bytes:
            s = m.group(0)
            if s[:1] == b'"':  # a timestamp
                return b'"timestamp":"' + _fmt_ts(_parse_ts(s[13:-1].decode()) + shift).encode() + b'"'
            new = mapping.get(s)
            if new is None:
                new = mapping[s] = self._fresh(s)
            return new

        out = [_IDS.sub(sub, raw) for raw in self.lines]
        out[self.root] = out[self.root].replace(_NULL_PARENT, b'"parentUuid":"' + self._last_tip + b'"', 1)
        self._last_tip = mapping.get(self.tip, self.tip)
        return out

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield from self.copy()


def make_claude_session(dest: Path, size_bytes: int, seed: int = 0, source: Path = CLAUDE_SOURCE) -> Path:
    """Write a Claude Code session of about ``size_bytes`` (cut at the first line boundary past it) made of
    copies of ``source`` with fresh ids and the chain continued; ``dest``."""
    make_claude_session_and_more(dest, size_bytes, 0, seed, source)
    return Path(dest)


def make_claude_session_and_more(dest: Path, size_bytes: int, more_lines: int, seed: int = 0,
                                 source: Path = CLAUDE_SOURCE) -> list[bytes]:
    """As :func:`make_claude_session`, and the ``more_lines`` lines that would come next (to append while
    following: the session goes on as it would)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    lines = iter(ClaudeCopies(source, seed))
    written = 0
    with open(dest, "wb") as fh:
        for raw in lines:
            fh.write(raw)
            written += len(raw)
            if written >= size_bytes:
                break
    return [next(lines) for _ in range(more_lines)]


# ---------------------------------------------------------------------------------------------- Codex

_CODEX_IDS = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                        rb"|call_[A-Za-z0-9]{16,}"
                        rb'|"timestamp":"[0-9T:.\-]+Z"')
_TOTAL = re.compile(rb'"total_token_usage":(\{[^{}]*\})')


class CodexCopies(ClaudeCopies):
    """A Codex rollout's lines copied without end: per copy fresh ``call_id``s and turn ids (every UUID but
    the session's id), timestamps moved on, ``total_token_usage`` carried on from the copies before (a
    call is a ``token_count`` whose running total changed); the ``session_meta`` line only once."""

    def __init__(self, source: Path = CODEX_SOURCE, seed: int = 0) -> None:
        self.source = Path(source)
        self.rng = random.Random(seed)
        self.lines = self.source.read_bytes().splitlines(keepends=True)
        self.copies = 0
        self.session_id = b""
        self.meta = -1
        self.final_total: dict[str, int] = {}
        stamps: list[datetime] = []
        for i, raw in enumerate(self.lines):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            payload = obj.get("payload")
            payload = payload if isinstance(payload, dict) else {}
            if obj.get("type") == "session_meta" and self.meta < 0:
                self.meta = i
                self.session_id = str(payload.get("id") or "").encode()
            if isinstance(obj.get("timestamp"), str):
                stamps.append(_parse_ts(obj["timestamp"]))
            m = _TOTAL.search(raw)
            if m:
                self.final_total = {k: v for k, v in json.loads(m.group(1)).items() if isinstance(v, int)}
        self.span = (max(stamps) - min(stamps) + timedelta(seconds=60)) if stamps else timedelta(hours=1)

    def _fresh(self, old: bytes) -> bytes:
        if old.startswith(b"call_"):
            return b"call_" + "".join(self.rng.choice(_ALNUM) for _ in range(len(old) - 5)).encode()
        return super()._fresh(old)

    def copy(self) -> list[bytes]:
        k = self.copies
        self.copies += 1
        if k == 0:
            return list(self.lines)
        mapping: dict[bytes, bytes] = {self.session_id: self.session_id} if self.session_id else {}
        shift = self.span * k
        offset = {key: v * k for key, v in self.final_total.items()}

        def sub(m: re.Match[bytes]) -> bytes:
            s = m.group(0)
            if s[:1] == b'"':
                return b'"timestamp":"' + _fmt_ts(_parse_ts(s[13:-1].decode()) + shift).encode() + b'"'
            new = mapping.get(s)
            if new is None:
                new = mapping[s] = self._fresh(s)
            return new

        def total(m: re.Match[bytes]) -> bytes:
            usage = json.loads(m.group(1))
            for key, v in offset.items():
                if isinstance(usage.get(key), int):
                    usage[key] += v
            return b'"total_token_usage":' + json.dumps(usage, separators=(",", ":")).encode()

        return [_TOTAL.sub(total, _CODEX_IDS.sub(sub, raw)) for i, raw in enumerate(self.lines) if i != self.meta]


def make_codex_session(dest: Path, size_bytes: int, seed: int = 0, source: Path = CODEX_SOURCE) -> Path:
    """A Codex rollout of about ``size_bytes`` made of copies of ``source`` (see :class:`CodexCopies`)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(dest, "wb") as fh:
        for raw in CodexCopies(source, seed):
            fh.write(raw)
            written += len(raw)
            if written >= size_bytes:
                break
    return dest


TAIL_LINES = 2000


def cached_claude_session(size_bytes: int, seed: int = 0, folder: Path = Path("/tmp/ctxbench-bigsession"),
                          tail_lines: int = TAIL_LINES) -> tuple[Path, list[bytes]]:
    """A generated session kept in ``folder`` and reused across runs (made once), and the lines that come next
    (at least ``tail_lines``, kept beside it as ``….tail``: to append while following; made again, longer, when
    fewer were kept: the generator is deterministic, so the session is the same)."""
    mb = size_bytes / (1024 * 1024)
    path = folder / f"claude-{mb:g}MB-seed{seed}.jsonl"
    tail = path.with_suffix(".tail")
    if (not path.exists() or not tail.exists() or path.stat().st_size < size_bytes
            or tail.read_bytes().count(b"\n") < tail_lines):
        part = path.with_suffix(".part")
        more = make_claude_session_and_more(part, size_bytes, max(TAIL_LINES, tail_lines), seed)
        tail.write_bytes(b"".join(more))
        part.replace(path)
    return path, tail.read_bytes().splitlines(keepends=True)


if __name__ == "__main__":
    dest, size = Path(sys.argv[1]), float(sys.argv[2])
    make_claude_session(dest, int(size * 1024 * 1024), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    print(dest, dest.stat().st_size)
