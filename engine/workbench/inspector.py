"""Inspector reads: an offloaded tool result (confined to the session's ``tool_results/``), an
archive day, an archive search. The pure readers raise :class:`InspectorError`; the part turns
results into events and errors into notices."""

from __future__ import annotations

import re
from pathlib import Path

from engine.context.conversation import Session
from engine.model.messages import Message
from engine.store import archive
from engine.workbench.core import WorkbenchCore
from engine.workbench.document import OpenDocument
from engine.workbench.events import ArchiveHits, ArchiveMessages, FileLoaded

OFFLOAD_PATH = re.compile(r"^tool_results/[0-9a-f]{32}\.txt$")
MAX_VIEW_BYTES = 8 * 1024 * 1024  # the viewer shows at most this much of one offloaded file


class InspectorError(Exception):
    """A read the inspector refuses or cannot do (the message is for the user)."""


def offloaded_rel_path(session_path: Path, path: str) -> str:
    """``path`` as ``tool_results/<hex>.txt`` of that session; InspectorError for anything else."""
    rel = path.replace("\\", "/")
    root = str(session_path).replace("\\", "/") + "/"
    if rel.startswith(root):
        rel = rel[len(root) :]
    if not OFFLOAD_PATH.match(rel):
        raise InspectorError(f"not an offloaded tool result of this session: {path}")
    return rel


def read_offloaded_text(session_path: Path, path: str, limit: int = MAX_VIEW_BYTES) -> tuple[str, str]:
    """(relative path, text) of an offloaded tool result: at most ``limit`` bytes, with a note."""
    rel = offloaded_rel_path(session_path, path)
    try:
        with open(session_path / rel, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InspectorError(f"cannot read {rel}: {exc.strerror or exc}") from exc
    text = data[:limit].decode("utf-8", "replace")
    if len(data) > limit:
        text += f"\n[… the viewer shows the first {limit // (1024 * 1024)} MB; open the file for all]"
    return rel, text


def archive_day(session: Session, day: str, problems: list[str]) -> tuple[list[Message], dict[str, int]]:
    """The messages archived on ``day`` and their token counts (archive.ArchiveError passes)."""
    messages = archive.read_day(session.path, day, problems)
    tokens = {str(m.get("id")): session.estimator.message(m) for m in messages if m.get("role") != "system"}
    return messages, tokens


def archive_hits(session_path: Path, query: str) -> list[archive.ArchiveHit]:
    return archive.search(session_path, query)


class InspectorPart:
    """The inspector part of the service (reads of the open session: the open document, and the core's events)."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument) -> None:
        self.core = core
        self.doc = doc

    def read_offloaded(self, path: str) -> None:
        """Read an offloaded tool result (only ``tool_results/<hex>.txt`` of the open session)."""
        session = self.doc.session
        if session is None:
            return
        try:
            rel, text = read_offloaded_text(session.path, path)
        except InspectorError as exc:
            self.core.notice("error", str(exc))
            return
        self.core.emit(FileLoaded(rel, text))

    def load_archive_day(self, day: str) -> None:
        session = self.doc.session
        if session is None:
            return
        problems: list[str] = []
        try:
            messages, tokens = archive_day(session, day, problems)
        except archive.ArchiveError as exc:
            self.core.notice("error", str(exc))
            return
        self.core.emit(ArchiveMessages(day, messages, tokens))
        for p in problems[:3]:
            self.core.notice("warning", f"archive: {p}")

    def search_archive(self, query: str) -> None:
        session = self.doc.session
        if session is None:
            return
        try:
            hits = archive_hits(session.path, query)
        except archive.ArchiveError as exc:
            self.core.notice("error", str(exc))
            return
        self.core.emit(ArchiveHits(query, hits))


__all__ = ["MAX_VIEW_BYTES", "OFFLOAD_PATH", "InspectorError", "InspectorPart", "read_offloaded_text"]
