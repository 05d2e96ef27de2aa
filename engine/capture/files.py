"""Capture files: ``<data dir>/captures/capture-<UTC time>-<id>.jsonl`` (JSON Lines, mode 0600).

The first line of each file is its header, ``{"type": "capture", "version": 1, "id", "part", "started", ...}``;
every other line is one finished exchange (``"type": "exchange"``, see :mod:`engine.capture.proxy` for the
fields), written whole in one ``write`` and fsync'd before the client sees the end of the response: a proxy
killed at any point loses no exchange that had finished. A file that grows past ``max_bytes`` rolls over: the
next exchange starts ``…-<id>.2.jsonl`` (``part`` 2, ``previous`` naming the file before), and so on.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.store.config import data_dir
from engine.store.fsutil import fsync_dir

CAPTURE_DIR = "captures"
VERSION = 1
MAX_BYTES = 256 * 2**20  # a capture file past this rolls over to its next part
FILE_MODE = 0o600
DIR_MODE = 0o700


def captures_dir(base: Path | None = None) -> Path:
    """Where captures are written: ``<data dir>/captures`` (``CTXBENCH_DATA_DIR`` or platformdirs')."""
    return (base or data_dir()) / CAPTURE_DIR


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_capture_path(folder: Path | None = None) -> Path:
    folder = folder or captures_dir()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return folder / f"capture-{stamp}-{secrets.token_hex(4)}.jsonl"


def encode_line(record: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, read back the same
        return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


class CaptureWriter:
    """Appends exchanges to a capture, thread-safe (the proxy writes from worker threads), each line fsync'd;
    rolls over past ``max_bytes``. ``info``: extra header fields (the agent's name, the upstreams)."""

    def __init__(self, path: Path | None = None, *, max_bytes: int = MAX_BYTES,
                 info: dict[str, Any] | None = None, sync: bool = True) -> None:
        self.first = Path(path) if path is not None else new_capture_path()
        self.max_bytes = max_bytes
        self.info = dict(info or {})
        self.sync = sync
        self.id = self.first.stem
        self.part = 0
        self.path = self.first
        self.paths: list[Path] = []
        self.exchanges = 0
        self._lock = threading.Lock()
        self._fd = -1
        self._size = 0
        self._closed = False
        self._part_exchanges = 0
        self._open_part()

    def _part_path(self, part: int) -> Path:
        return self.first if part == 1 else self.first.with_name(f"{self.first.stem}.{part}{self.first.suffix}")

    def _open_part(self) -> None:
        previous = self.path if self.part else None
        self.part += 1
        self.path = self._part_path(self.part)
        folder = self.path.parent
        new_folder = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        if new_folder:
            os.chmod(folder, DIR_MODE)
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)  # read: its last byte
        fd = os.open(self.path, flags, FILE_MODE)
        os.fchmod(fd, FILE_MODE)  # an existing file (or a umask) never leaves it readable by others
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self._size = os.fstat(fd).st_size
        self.paths.append(self.path)
        self._part_exchanges = 0
        # every run that writes to the file opens with its header (a capture a later run appends to has two)
        header = {"type": "capture", "version": VERSION, "id": self.id, "part": self.part, "started": now_iso(),
                  "pid": os.getpid(), **self.info}
        if previous is not None:
            header["previous"] = previous.name
        line = encode_line(header)
        if self._size:
            header["appended"] = True
            line = encode_line(header)
            if os.pread(fd, 1, self._size - 1) != b"\n":  # a line torn by a crash ends where the header starts
                line = b"\n" + line
        self._write(line)
        fsync_dir(folder)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self.sync:
            os.fsync(self._fd)
        self._size += len(data)

    def append(self, record: dict[str, Any]) -> Path:
        """Write one exchange (a whole line, fsync'd); the file it went to."""
        data = encode_line(record)
        with self._lock:
            if self._closed:
                raise ValueError("the capture is closed")
            if self._size + len(data) > self.max_bytes and self.exchanges_in_part() > 0:
                self._open_part()
            self._write(data)
            self.exchanges += 1
            self._part_exchanges += 1
            return self.path

    def exchanges_in_part(self) -> int:
        return self._part_exchanges

    def close(self) -> None:
        with self._lock:
            if not self._closed and self._fd >= 0:
                os.close(self._fd)
            self._closed = True

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def capture_parts(path: Path) -> list[Path]:
    """The parts of the capture ``path`` belongs to (its first file and the rolled-over ones), in order."""
    path = Path(path)
    stem = path.stem
    base = stem.rsplit(".", 1)[0] if stem.rsplit(".", 1)[-1].isdigit() and "." in stem else stem
    first = path.with_name(base + path.suffix)
    parts = [first] if first.exists() else []
    n = 2
    while (nxt := first.with_name(f"{base}.{n}{path.suffix}")).exists():
        parts.append(nxt)
        n += 1
    return parts or [path]
