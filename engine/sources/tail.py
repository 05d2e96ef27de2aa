"""The one follower of a file that an agent appends to (issue 28): :class:`Tail` remembers where the last read
stopped and gives what was appended since, complete lines only. Every loop that reads a growing file reads it
through a Tail: ``ctxbench follow`` and the window (:class:`engine.sources.follow.Follower`, the read-only views of
:mod:`engine.workbench.source_views`), the usage index's kept readers (:mod:`engine.usage.index`) and the sources
scan's light pass (:mod:`engine.sources.session_summary`).

A partial last line waits (its bytes are kept) until its newline arrives. A file that was replaced (another
inode), truncated (smaller than the offset) or rewritten in place (its first bytes, or the bytes just before the
offset, changed) is read again from the start, and the reset is reported. The file is opened for each read and
closed again: never written, locked or held open.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from engine.sources import model as source_model
from engine.sources.model import SourceError, open_regular

CHUNK = 1 << 20  # bytes read at a time
BLOCK = 8 * 2**20  # bytes a pass that searches a whole file reads at a time
SIGNATURE = 64  # bytes compared at the start of the file and before the offset to notice a rewrite
ResetReason = Literal["truncated", "replaced", "rewritten"]


class Tail:
    """The complete lines appended to one file since the last :meth:`read`. Only a regular file is opened (a FIFO
    or a device put at the path is not read), and a line is never held longer than ``limit`` bytes: a longer one
    comes out as its first ``limit + 1`` bytes (which the readers skip as too long, saying so)."""

    def __init__(self, path: Path, limit: int | None = None) -> None:
        self.path = Path(path)
        self.limit = source_model.MAX_LINE_BYTES if limit is None else limit
        self.offset = 0  # bytes consumed, the partial line included
        self.partial = bytearray()
        self._overlong = False  # the partial line passed the limit: the rest of it, up to its newline, is dropped
        self._ident: tuple[int, int] | None = None
        self._stamp: tuple[int, int] = (-1, -1)  # (size, mtime_ns) at the last read
        self._head = b""  # the file's first bytes, as read
        self._last = b""  # the last bytes read (just before ``offset``)
        self.gone = ""  # why the file cannot be read now (deleted, not a regular file…); "" while it can
        self._told = ""  # the ``gone`` reason :meth:`notice` already gave

    def _reset(self) -> None:
        self.offset = 0
        self.partial.clear()
        self._overlong = False
        self._head = self._last = b""

    def notice(self) -> str | None:
        """Why the file cannot be read, once each time it stops being readable; None otherwise (and again None
        until it has come back and gone again)."""
        if not self.gone or self.gone == self._told:
            return None
        self._told = self.gone
        return self.gone

    def _changed_under_us(self, fh: Any, st: os.stat_result) -> ResetReason | None:
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and ident != self._ident:
            return "replaced"
        if st.st_size < self.offset:
            return "truncated"
        if self.offset and (st.st_size, st.st_mtime_ns) != self._stamp:
            head = fh.read(len(self._head))
            fh.seek(self.offset - len(self._last))
            if head != self._head or fh.read(len(self._last)) != self._last:
                return "rewritten"
        return None

    def _open(self) -> Any:
        """The file opened for reading, or None (``gone`` says why) when there is none to read at the path."""
        try:
            fh = open_regular(self.path)  # closed by the caller: never held between reads
        except FileNotFoundError:
            self.gone = "deleted: no file at this path now" if self._ident is not None else "no file at this path"
            return None
        except SourceError as exc:  # a FIFO, a device, a folder put in its place
            self.gone = str(exc).removeprefix(f"{self.path.name}: ")
            return None
        except OSError as exc:
            self.gone = f"cannot be read: {exc.strerror or exc}"
            return None
        self.gone = self._told = ""
        return fh

    def read(self, limit: int = CHUNK) -> tuple[list[bytes], ResetReason | None, bool]:
        """(complete lines, why the file was re-read from its start or None, whether more is waiting).

        A missing file (or one that is not a regular file) reads as nothing (it may be being replaced); ``gone``
        says why, :meth:`notice` once."""
        block, reason, more = self.read_block(limit)
        return (block[:-1].split(b"\n") if block else []), reason, more

    def read_block(self, limit: int | None = CHUNK) -> tuple[bytes, ResetReason | None, bool]:
        """:meth:`read`, the complete lines as one block of bytes (each line ending with its newline; an over-long
        line as its first ``self.limit + 1`` bytes): what a pass that searches bytes, not lines, reads."""
        fh = self._open()
        if fh is None:
            return b"", None, False
        with fh:
            return self.read_from(fh, limit)

    def read_from(self, fh: Any, limit: int | None = CHUNK) -> tuple[bytes, ResetReason | None, bool]:
        """:meth:`read_block` from ``fh``, this file opened by the caller (which says itself why it cannot open it):
        at most ``limit`` bytes (None: all there is)."""
        st = os.fstat(fh.fileno())
        reason = self._changed_under_us(fh, st)
        if reason is not None:
            self._reset()
        self._ident = (st.st_dev, st.st_ino)
        fh.seek(self.offset)
        data = fh.read() if limit is None else fh.read(max(0, min(limit, st.st_size - self.offset)))
        self._stamp = (st.st_size, st.st_mtime_ns)
        if not data:
            return b"", reason, False
        if len(self._head) < SIGNATURE:
            self._head = (self._head + data[:SIGNATURE])[:SIGNATURE]
        self.offset += len(data)
        self._last = (self._last + data[-SIGNATURE:])[-SIGNATURE:]
        return self._block(data), reason, self.offset < st.st_size

    @property
    def waiting(self) -> bytes:
        """The last line so far, read but without its newline yet (b"" when there is none, or when it is already
        longer than ``limit``: it will come out cut, as an over-long line)."""
        return b"" if self._overlong or len(self.partial) > self.limit else bytes(self.partial)

    def _block(self, data: bytes) -> bytes:
        """The lines ``data`` completes, as one block (split at ``\\n`` only, as the agents write them: a carriage
        return inside a line is the line's); the rest waits in ``partial``, never more than ``limit + 1`` bytes of
        it (an over-long line comes out as those bytes and its newline)."""
        head = b""
        if self._overlong:
            end = data.find(b"\n")
            if end < 0:
                return b""  # still the over-long line: dropped
            head = bytes(self.partial) + b"\n"  # its first limit + 1 bytes: skipped as too long by the reader
            self.partial.clear()
            self._overlong = False
            data = data[end + 1:]
        cut = data.rfind(b"\n")
        if cut < 0:
            self._keep(data)
            return head
        block = bytes(self.partial) + data[:cut + 1] if self.partial else data[:cut + 1]
        self.partial = bytearray()
        self._keep(data[cut + 1:])
        return head + block if head else block

    def _keep(self, data: bytes) -> None:
        room = self.limit + 1 - len(self.partial)
        if len(data) > room:
            self.partial += data[:room]
            self._overlong = True
        else:
            self.partial += data


Needles = Callable[[], tuple[bytes, ...]]  # what a line must hold to be given now (asked again after each line)


def holding(data: bytes, needles: Needles) -> Iterator[bytes]:
    """The lines of ``data`` (complete lines, each ending with its newline) holding one of ``needles()`` (asked again
    after each line given: a pass that found what it looked for looks for less), found by byte search: the other lines
    are passed over at memchr speed, never split out. Each needle is searched once per stretch of ``data`` (its next
    place kept until passed), so the work is linear. A line longer than :data:`engine.sources.model.MAX_LINE_BYTES`
    (an over-long one the Tail cut) is passed over."""
    pos, end = 0, len(data)
    found: dict[bytes, int] = {}
    limit = source_model.MAX_LINE_BYTES + 1
    find, rfind = data.find, data.rfind
    wanted = needles()
    while pos < end and wanted:
        hit = end
        for needle in wanted:
            at = found.get(needle, -1)
            if at < pos:
                at = find(needle, pos)
                found[needle] = at = end if at < 0 else at
            if at < hit:
                hit = at
        if hit >= end:
            return
        start = rfind(b"\n", pos, hit) + 1 or pos
        stop = find(b"\n", hit) + 1 or end
        if stop - start <= limit:
            yield data[start:stop]
            wanted = needles()
        pos = stop


def appended_blocks(tail: Tail, fh: Any, *, name: str, block: int = BLOCK
                    ) -> Iterator[tuple[bytes, ResetReason | None]]:
    """What ``tail`` reads from the open file ``fh`` until it has read all there is: blocks of complete lines (of at
    most ``block`` bytes read at a time), each with why the file was read again from its start (None when it was
    not). Reading for longer than :data:`engine.sources.model.FILE_SECONDS` raises SourceError naming ``name``: after
    the block that brings the lines counted since that time (in each block's first MiB) to 4,096, so that a small file
    is never stopped, as :func:`engine.sources.model.capped_lines` does."""
    started, lines, more = time.monotonic(), 0, True
    while more:
        data, reset, more = tail.read_from(fh, block)
        yield data, reset
        if time.monotonic() - started > source_model.FILE_SECONDS:  # (only then are lines counted: counting costs)
            lines += data.count(b"\n", 0, 2**20)
            if lines >= 4096:
                raise SourceError(f"{name or 'the file'}: reading took more than "
                                  f"{source_model.FILE_SECONDS:.0f} s: stopped")


def lines_holding(fh: Any, needles: Needles | bytes, *, name: str = "", block: int = BLOCK,
                  partial: bool = False) -> Iterator[bytes]:
    """The complete lines of the binary file ``fh`` (from its start) holding one of ``needles`` (:func:`holding`),
    read a block at a time by a :class:`Tail` (:func:`appended_blocks`, its time cap); a line longer than
    :data:`engine.sources.model.MAX_LINE_BYTES` is passed over unread. With ``partial``, the last line without its
    newline yet too (when it holds one and is not over-long), after the others."""
    wanted: Needles = needles if callable(needles) else (lambda: (needles,))
    tail = Tail(Path(name or "file"))
    for data, _ in appended_blocks(tail, fh, name=name, block=block):
        if data:
            yield from holding(data, wanted)
    last = tail.waiting
    if partial and last and any(needle in last for needle in wanted()):
        yield last
