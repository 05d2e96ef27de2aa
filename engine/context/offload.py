"""Tool results out of the context: offload to ``tool_results/<uuid4 hex>.txt`` (SPEC §3).

After each tool step, every tool result larger than its limit is cut and its full text written to
``tool_results/<uuid4 hex>.txt`` in the session folder. The tool message keeps an excerpt plus a
notice (how many lines, from which line, how many bytes, which file, and the exact
``start_line=<N>`` hint for the built-in ``read_file`` tool), and a metadata field::

    msg["offload"] = {"path": "tool_results/<hex>.txt", "bytes": <full size>, "lines": <total lines>,
                      "strategy": "truncate" | "middle_out" | "prune", ...}

so the GUI can link to the file and retention can see which files are still referred to.

Limits: the most recent tool results (the trailing run of tool messages, and at least the last
``offload_recent_n`` messages) keep up to ``offload_recent_bytes``; older ones
``offload_old_bytes``. A result within limit + 100 bytes is left alone. A result that was already
cut is re-cut in place when it ages into the smaller limit: same file, notice updated.

Three strategies (``Settings.offload_strategy``):

- ``truncate`` (default): head-only excerpt with a read-more notice (:func:`truncate_text_output`);
- ``middle_out``: keep the head and the tail, say how many tokens were cut from the middle
  (:func:`middle_out`);
- ``prune``: oversized fresh results are cut at the recent limit as in ``truncate`` (a 100 MB result
  never sits in the context), aged ones are not re-cut; instead, once more than
  ``prune_protect_tokens`` of tool output sit before the last ``prune_protect_turns`` user turns,
  every older output is a candidate, and if the candidates hold more than ``prune_minimum_tokens``
  each is replaced by a short marker naming its file (written first if it had none).

File names are always fresh uuid4 hex strings: never anything from model output. Files are
written off the event loop, in chunks, under a ``.part`` name and renamed when complete and
fsync'd, so a crash never leaves a referenced file half written and a 100 MB output is never held
twice in memory.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.context.tokens import Estimator, HeuristicEstimator
from engine.model.messages import TEXT_PART_TYPES, Message, content_text
from engine.store.config import Settings
from engine.store.fsutil import append_lines, fsync_dir
from engine.store.offloads import (
    INDEX_FILE,
    PART_SUFFIX,
    RESULTS_DIR,
    OffloadedFile,
    cleanup_retention,
    list_offloaded,
    referenced_files,
)

if TYPE_CHECKING:
    from engine.context.conversation import Session

GRACE_BYTES = 100
CHUNK_CHARS = 1 << 20  # characters encoded and written per step of a large write

NOTICE_MARK = "\n\n[Output truncated."
MIDDLE_MARK = "\n\n[… "
PRUNE_MARK = "[Old tool output removed from the context"
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


# --------------------------------------------------------------------------- byte helpers


def _encode(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates (undecodable input bytes) map back to raw bytes."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (one for one, so lengths are kept)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub("\ufffd", text)


def _context_text(text: str) -> str:
    """``text`` as the context will hold it (lone surrogates → U+FFFD), scanned chunk by chunk."""
    for i in range(0, len(text), CHUNK_CHARS):
        if _SURROGATE_RE.search(text, i, i + CHUNK_CHARS):
            return _SURROGATE_RE.sub("\ufffd", text)
    return text


def byte_size(text: str) -> int:
    return len(_encode(text))


def _exceeds(text: str, limit: int) -> bool:
    """True when ``text`` is more than ``limit`` bytes, without encoding more than ``limit + 1`` chars."""
    if len(text) > limit:
        return True  # every character is at least one byte
    return len(_encode(text)) > limit


def _prefix_within(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` of at most ``max_bytes`` UTF-8 bytes; never splits a character."""
    if max_bytes <= 0:
        return ""
    head = _encode(text[:max_bytes])  # max_bytes chars encode to >= min(len, max_bytes) bytes
    if len(head) <= max_bytes:
        return text[:max_bytes]
    i = max_bytes
    while i > 0 and (head[i] & 0xC0) == 0x80:  # step back over continuation bytes
        i -= 1
    return _decode(head[:i])


def _suffix_within(text: str, max_bytes: int) -> str:
    """The longest suffix of ``text`` of at most ``max_bytes`` UTF-8 bytes; never splits a character."""
    if max_bytes <= 0:
        return ""
    tail = _encode(text[-max_bytes:])
    if len(tail) <= max_bytes:
        return text[-max_bytes:]
    i = len(tail) - max_bytes
    while i < len(tail) and (tail[i] & 0xC0) == 0x80:  # skip a split character's continuation bytes
        i += 1
    return _decode(tail[i:])


def count_lines(text: str) -> int:
    """Lines as ``read_file`` counts them: newlines, plus one for an unterminated last line."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


# --------------------------------------------------------------------------- the cuts


def truncate_text_output(
    text: str, *, start_line: int, total_lines: int, max_bytes: int, file_path: str
) -> str:
    """Cut ``text`` to ``max_bytes`` bytes and append a read-more notice (SPEC §3).

    ``nl`` = newlines in the cut; ``next = start_line + max(1, nl)``; the line to read from is ``next``
    if ``next ≤ total_lines``, else ``total_lines`` if ``start_line < total_lines``, else there is
    nothing more and no notice is added. A text within ``max_bytes`` comes back unchanged.
    """
    if not _exceeds(text, max_bytes):
        return text
    cut = _prefix_within(text, max_bytes)
    nl = cut.count("\n")
    nxt = start_line + max(1, nl)
    if nxt <= total_lines:
        read_from = nxt
    elif start_line < total_lines:
        read_from = total_lines
    else:
        return cut
    covered = byte_size(cut)
    return cut + (
        f"{NOTICE_MARK} This excerpt starts at line {start_line} of {total_lines} lines and covers "
        f"{covered} bytes. The full output is saved in {file_path}. To read more, call read_file with "
        f'path="{file_path}" start_line={read_from}.]'
    )


def _whole_line_notice(cut: str, total_lines: int, total_bytes: int, file_path: str) -> str:
    """Notice for a cut with nothing further to read line-wise (one giant line): name the file anyway."""
    return cut + (
        f"{NOTICE_MARK} This excerpt covers {byte_size(cut)} of {total_bytes} bytes "
        f"({total_lines} line{'s' if total_lines != 1 else ''} in total). "
        f"The full output is saved in {file_path}.]"
    )


def _middle_parts(head_src: str, tail_src: str, max_bytes: int) -> tuple[str, str]:
    half = max_bytes // 2
    head = _prefix_within(head_src, half)
    tail = _suffix_within(tail_src, max_bytes - byte_size(head))
    return head, tail


def _middle_marker(removed_chars: int, head: str, total_lines: int, file_path: str) -> str:
    tokens = removed_chars * 2 // 5  # the heuristic's chars × 2 // 5
    first = head.count("\n") + 1
    return (
        f"{MIDDLE_MARK}{tokens} tokens ({removed_chars} characters) were cut from the middle of this "
        f"output. The full output ({total_lines} lines) is saved in {file_path}; to read the cut part, "
        f'call read_file with path="{file_path}" start_line={first}. …]\n\n'
    )


def middle_out(text: str, *, max_bytes: int, file_path: str, total_lines: int | None = None) -> str:
    """Keep the head and the tail of ``text`` (about ``max_bytes`` in all) and say what was cut.

    The marker between them states how many tokens (heuristic) and characters were removed, the
    file holding the full text, and a ``start_line=<N>`` hint where the cut begins. A text within
    ``max_bytes`` comes back unchanged.
    """
    if not _exceeds(text, max_bytes):
        return text
    head, tail = _middle_parts(text, text, max_bytes)
    lines = count_lines(text) if total_lines is None else total_lines
    removed = len(text) - len(head) - len(tail)
    return head + _middle_marker(removed, head, lines, file_path) + tail


def prune_marker(path: str, tokens: int, lines: int, nbytes: int) -> str:
    return (
        f"{PRUNE_MARK} to save space ({tokens} tokens, {lines} lines, {nbytes} bytes). "
        f'The full text is saved in {path}: read it with read_file(path="{path}", start_line=1).]'
    )


def plan_prune(
    history: Sequence[Message],
    counts: Sequence[int],
    *,
    protect_tokens: int,
    minimum_tokens: int,
    protect_turns: int,
) -> list[int]:
    """Indexes of the tool outputs to prune (BaseAgent / OpenCode rule), oldest first; pure.

    Walk back from the newest message; messages from the ``protect_turns``-th last user message on
    are protected. Count tool-output tokens; once more than ``protect_tokens`` have been seen, every
    older output (the one that crossed included) is a candidate. If the candidates hold more than
    ``minimum_tokens``, they are all returned, else none. Outputs already pruned are skipped.
    """
    users = [i for i, m in enumerate(history) if m.get("role") == "user"]
    if protect_turns <= 0:
        boundary = len(history)
    elif len(users) >= protect_turns:
        boundary = users[-protect_turns]
    else:
        return []
    seen = 0
    candidates: list[int] = []
    pruned_tokens = 0
    for i in range(boundary - 1, -1, -1):
        msg = history[i]
        if msg.get("role") != "tool" or (msg.get("offload") or {}).get("pruned"):
            continue
        seen += counts[i]
        if seen > protect_tokens:
            candidates.append(i)
            pruned_tokens += counts[i]
    if pruned_tokens <= minimum_tokens:
        return []
    return sorted(candidates)


# --------------------------------------------------------------------------- files


def _iter_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]


def _encode_chunks(text: str) -> Iterator[bytes]:
    for chunk in _iter_chunks(text):
        yield _encode(chunk)


def _write_text_file(path: Path, text: str) -> tuple[int, int]:
    """Write ``text`` to ``path`` chunk by chunk (temp name, fsync, rename); return (bytes, lines).

    Runs in a worker thread. Only one chunk's bytes exist at a time beside ``text`` itself.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + PART_SUFFIX)
    total = 0
    newlines = 0
    last = b""
    try:
        with open(part, "wb") as fh:
            for data in _encode_chunks(text):
                fh.write(data)
                total += len(data)
                newlines += data.count(b"\n")
                if data:
                    last = data[-1:]
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(part, path)
    except BaseException:
        try:
            part.unlink()
        except OSError:
            pass
        raise
    fsync_dir(path.parent)
    lines = newlines + (1 if total and last != b"\n" else 0)
    return total, lines


@dataclass
class OffloadRecord:
    """What one offload action did to one tool message."""

    message_id: str
    tool_call_id: str
    tool_name: str
    action: str  # "offloaded" | "recut" | "pruned"
    path: str  # relative to the session folder
    full_bytes: int
    lines: int
    before_bytes: int  # bytes of the message's text in the context before the action
    after_bytes: int  # ... and after


def _tool_names(history: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for m in history:
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or ():
                if isinstance(call, dict):
                    fn = call.get("function") or {}
                    names.setdefault(str(call.get("id") or ""), str(fn.get("name") or ""))
    return names


def _set_text(msg: Message, text: str) -> None:
    """Replace the text of a tool message, keeping any non-text parts of a list content."""
    content = msg.get("content")
    if isinstance(content, list):
        others = [p for p in content if isinstance(p, dict) and p.get("type", "text") not in TEXT_PART_TYPES]
        msg["content"] = [{"type": "text", "text": text}, *others]
    else:
        msg["content"] = text


def recent_indexes(history: Sequence[Message], recent_n: int) -> set[int]:
    """Indexes that get the recent limit: the trailing run of tool messages and the last ``recent_n``."""
    n = len(history)
    out = set(range(max(0, n - recent_n), n))
    i = n - 1
    while i >= 0 and history[i].get("role") == "tool":
        out.add(i)
        i -= 1
    return out


def _record(
    msg: Message, tool_name: str, action: str, info: dict[str, Any], *, before_bytes: int, after_bytes: int
) -> OffloadRecord:
    """What one offload step did to ``msg`` (whose ``offload`` entry is ``info``)."""
    return OffloadRecord(
        message_id=str(msg.get("id") or ""),
        tool_call_id=str(msg.get("tool_call_id") or ""),
        tool_name=tool_name,
        action=action,
        path=str(info["path"]),
        full_bytes=int(info.get("bytes") or 0),
        lines=int(info.get("lines") or 0),
        before_bytes=before_bytes,
        after_bytes=after_bytes,
    )


class Offloader:
    """Offloads the tool results of one session folder, per the settings' strategy and limits."""

    def __init__(self, session_dir: Path, settings: Settings, estimator: Estimator | None = None) -> None:
        self.session_dir = Path(session_dir)
        self.settings = settings
        self.estimator = estimator or HeuristicEstimator()

    @property
    def results_dir(self) -> Path:
        return self.session_dir / RESULTS_DIR

    def _new_path(self) -> tuple[str, Path]:
        name = f"{uuid.uuid4().hex}.txt"
        return f"{RESULTS_DIR}/{name}", self.results_dir / name

    async def _save(self, msg: Message, text: str, tool_name: str) -> tuple[str, int, int]:
        rel, path = self._new_path()
        nbytes, lines = await asyncio.to_thread(_write_text_file, path, text)
        entry = {
            "path": rel,
            "bytes": nbytes,
            "lines": lines,
            "created": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "tool": tool_name,
            "message_id": str(msg.get("id") or ""),
            "tool_call_id": str(msg.get("tool_call_id") or ""),
        }
        await asyncio.to_thread(append_lines, self.results_dir / INDEX_FILE, [entry])
        return rel, nbytes, lines

    # ------------------------------------------------------------------ one step

    async def offload_step(self, history: list[Message]) -> list[OffloadRecord]:
        """Cut every oversized tool result of ``history`` in place; return what was done.

        Call after each tool step, with the new tool results already at the end of ``history``.
        The caller persists the changed messages (see :meth:`offload_session`).
        """
        s = self.settings
        strategy = s.offload_strategy
        recent = recent_indexes(history, s.offload_recent_n)
        names = _tool_names(history)
        records: list[OffloadRecord] = []
        for i, msg in enumerate(history):
            if msg.get("role") != "tool":
                continue
            limit = s.offload_recent_bytes if i in recent else s.offload_old_bytes
            info = msg.get("offload")
            name = str(msg.get("name") or names.get(str(msg.get("tool_call_id") or ""), ""))
            if isinstance(info, dict) and info.get("path"):
                if info.get("pruned") or strategy == "prune":
                    continue
                rec = self._recut(msg, info, limit, name)
            else:
                rec = await self._offload_fresh(msg, limit, name, strategy)
            if rec is not None:
                records.append(rec)
        if strategy == "prune":
            records.extend(await self.prune_old_outputs(history))
        return records

    async def _offload_fresh(
        self, msg: Message, limit: int, name: str, strategy: str
    ) -> OffloadRecord | None:
        raw = content_text(msg.get("content"))
        # limits apply to the text the context will hold, where a lone surrogate (JSON "\ud800", an
        # undecodable byte) becomes U+FFFD, 3 bytes; the file keeps the output as it came
        if raw.isascii():
            text = raw
        elif len(raw) < CHUNK_CHARS:
            text = _context_text(raw)
        else:
            text = await asyncio.to_thread(_context_text, raw)
        if not text or not _exceeds(text, limit + GRACE_BYTES):
            return None
        rel, nbytes, lines = await self._save(msg, raw, name)
        info: dict[str, Any] = {"path": rel, "bytes": nbytes, "lines": lines, "chars": len(text)}
        if strategy == "middle_out":
            head, tail = _middle_parts(text, text, limit)
            new = head + _middle_marker(len(text) - len(head) - len(tail), head, lines, rel) + tail
            info.update(strategy="middle_out", head_chars=len(head), tail_chars=len(tail), limit=limit)
            shown = head + tail
        else:
            new = truncate_text_output(text, start_line=1, total_lines=lines, max_bytes=limit, file_path=rel)
            shown = _prefix_within(text, limit)
            if new == shown:  # one giant line: nothing to read line-wise, still name the file
                new = _whole_line_notice(shown, lines, nbytes, rel)
            info.update(strategy="truncate", start_line=1, excerpt_chars=len(shown), limit=limit)
        info["shown_bytes"] = byte_size(shown)
        _set_text(msg, clean_text(new))
        msg["offload"] = info
        return _record(msg, name, "offloaded", info, before_bytes=nbytes, after_bytes=byte_size(new))

    def _recut(self, msg: Message, info: dict[str, Any], limit: int, name: str) -> OffloadRecord | None:
        text = content_text(msg.get("content"))
        rel = str(info["path"])
        lines = int(info.get("lines") or 0)
        nbytes = int(info.get("bytes") or 0)
        before = byte_size(text)
        if info.get("strategy") == "middle_out":
            h, t = int(info.get("head_chars") or 0), int(info.get("tail_chars") or 0)
            head, tail = text[:h], (text[len(text) - t :] if t else "")
            if byte_size(head) + byte_size(tail) <= limit + GRACE_BYTES:
                return None
            new_head, new_tail = _middle_parts(head, tail, limit)
            total_chars = int(info.get("chars") or (len(head) + len(tail)))
            removed = max(0, total_chars - len(new_head) - len(new_tail))
            new = new_head + _middle_marker(removed, new_head, lines, rel) + new_tail
            info.update(head_chars=len(new_head), tail_chars=len(new_tail), limit=limit)
            shown = new_head + new_tail
        else:
            n = info.get("excerpt_chars")
            if isinstance(n, int) and 0 <= n <= len(text) and text[n:].startswith(NOTICE_MARK):
                excerpt = text[:n]
            else:
                at = text.rfind(NOTICE_MARK)
                excerpt = text[:at] if at >= 0 else text
            if not _exceeds(excerpt, limit + GRACE_BYTES):
                return None
            start = int(info.get("start_line") or 1)
            new = truncate_text_output(
                excerpt, start_line=start, total_lines=lines, max_bytes=limit, file_path=rel
            )
            shown = _prefix_within(excerpt, limit)
            if new == shown:
                new = _whole_line_notice(shown, lines, nbytes, rel)
            info.update(excerpt_chars=len(shown), limit=limit)
        info["shown_bytes"] = byte_size(shown)
        _set_text(msg, new)
        msg["offload"] = info
        return _record(msg, name, "recut", info, before_bytes=before, after_bytes=byte_size(new))

    # ------------------------------------------------------------------ prune strategy

    async def prune_old_outputs(self, history: list[Message]) -> list[OffloadRecord]:
        """Replace old tool outputs by markers naming their files (SPEC §3 prune); in place."""
        s = self.settings
        counts = [self.estimator.message(m) if m.get("role") == "tool" else 0 for m in history]
        chosen = plan_prune(
            history,
            counts,
            protect_tokens=s.prune_protect_tokens,
            minimum_tokens=s.prune_minimum_tokens,
            protect_turns=s.prune_protect_turns,
        )
        names = _tool_names(history)
        records: list[OffloadRecord] = []
        for i in chosen:
            msg = history[i]
            name = str(msg.get("name") or names.get(str(msg.get("tool_call_id") or ""), ""))
            text = content_text(msg.get("content"))
            before = byte_size(text)
            info = msg.get("offload")
            if isinstance(info, dict) and info.get("path"):
                rel = str(info["path"])
                nbytes, lines = int(info.get("bytes") or 0), int(info.get("lines") or 0)
                info = dict(info)
            else:
                rel, nbytes, lines = await self._save(msg, text, name)
                info = {"path": rel, "bytes": nbytes, "lines": lines, "chars": len(text)}
            marker = prune_marker(rel, counts[i], lines, nbytes)
            info.update(pruned=True, strategy="prune", shown_bytes=0)
            _set_text(msg, marker)
            msg["offload"] = info
            records.append(
                OffloadRecord(
                    message_id=str(msg.get("id") or ""),
                    tool_call_id=str(msg.get("tool_call_id") or ""),
                    tool_name=name,
                    action="pruned",
                    path=rel,
                    full_bytes=nbytes,
                    lines=lines,
                    before_bytes=before,
                    after_bytes=byte_size(marker),
                )
            )
        return records

    # ------------------------------------------------------------------ with a session

    async def offload_session(self, session: Session, pending: Sequence[Message] = ()) -> list[OffloadRecord]:
        """Run a step over ``session.messages + pending``, persist the changes, then append ``pending``.

        New tool results passed as ``pending`` are cut before they are first written, so a huge
        output never reaches ``history.jsonl``; aged results already stored are updated in place.
        """
        pending = list(pending)
        live = list(session.messages)
        records = await self.offload_step(live + pending)
        pending_ids = {str(m.get("id")) for m in pending}
        changed = {r.message_id for r in records if r.message_id not in pending_ids}
        # a background compaction may have moved some of them to the archive meanwhile: skip those
        changed = {i for i in changed if i in session}
        if changed:
            session.update_messages([m for m in live if str(m.get("id")) in changed])
        if pending:
            session.extend(pending)
        return records


__all__ = [
    "OffloadRecord",
    "OffloadedFile",
    "Offloader",
    "cleanup_retention",
    "count_lines",
    "list_offloaded",
    "middle_out",
    "plan_prune",
    "prune_marker",
    "recent_indexes",
    "referenced_files",
    "truncate_text_output",
]
