"""The sessions under one root folder: list, create, open, rename, delete."""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from engine.model.messages import now_iso
from engine.store.config import data_dir
from engine.store.fsutil import atomic_write_json, count_file_lines, fsync_dir, json_loads
from engine.store.session import SessionError, StoredSession
from engine.store.session_load import HISTORY_FILE, ID_RE, SESSION_FILE
from engine.store.staging import IMPORT_PREFIX, remove_if_stale

S = TypeVar("S", bound=StoredSession)


@dataclass
class SessionInfo:
    id: str
    title: str
    path: Path
    created: str
    updated: str
    message_count: int
    model: str = ""
    problem: str = ""


class SessionIndex(Generic[S]):
    """The sessions under one root folder (default ``data_dir()/sessions``), opened as ``session_class``."""

    session_class: type[S]

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else data_dir() / "sessions"
        self._open: dict[str, S] = {}

    def new_id(self) -> str:
        return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"

    def path_for(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not ID_RE.match(session_id) or ".." in session_id:
            raise SessionError(f"not a session id: {session_id!r}")
        return self.root / session_id

    def create(self, title: str = "", *, estimator: Any = None, **meta: Any) -> S:
        self.root.mkdir(parents=True, exist_ok=True)
        sid = self.new_id()
        path = self.path_for(sid)
        session: S = self.session_class.create(path, title or "New session", estimator=estimator, meta=meta or None)
        self._open[sid] = session
        return session

    def open(
        self, id_or_path: str | Path, *, estimator: Any = None, retention_days: int | None = None
    ) -> S:
        """Load a session by id (under the root) or by folder path."""
        candidate = Path(id_or_path)
        if isinstance(id_or_path, Path) or os.sep in str(id_or_path) or candidate.is_absolute():
            path = candidate
        else:
            path = self.path_for(str(id_or_path))
        if not (path / SESSION_FILE).exists() and not (path / HISTORY_FILE).exists():
            raise SessionError(f"no session {str(id_or_path)!r} (looked in {path})")
        session: S = self.session_class.load(path, estimator=estimator, retention_days=retention_days)
        self._open[session.id] = session
        return session

    def rename(self, session_id: str, title: str) -> None:
        title = title.strip()
        if not title:
            raise SessionError("a session title cannot be empty")
        live = self._open.get(session_id)
        if live is not None and not live.closed:
            live.set_title(title)
            return
        path = self.path_for(session_id)
        meta_path = path / SESSION_FILE
        try:
            meta = json_loads(meta_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SessionError(f"cannot rename session {session_id}: {exc}") from exc
        meta["title"] = title
        meta["updated"] = now_iso()
        atomic_write_json(meta_path, meta)

    def delete(self, session_id: str) -> None:
        """Delete a session folder (renamed aside first, so a listing never sees half of it)."""
        path = self.path_for(session_id)
        if not path.is_dir():
            raise SessionError(f"no session {session_id!r}")
        live = self._open.pop(session_id, None)
        if live is not None:
            live.close()
        doomed = self.root / f".deleted-{session_id}-{uuid.uuid4().hex[:6]}"
        os.replace(path, doomed)
        fsync_dir(self.root)
        shutil.rmtree(doomed, ignore_errors=True)

    def list(self) -> list[SessionInfo]:
        """Every session, most recently updated first; reads session.json and counts history lines."""
        if not self.root.is_dir():
            return []
        out: list[SessionInfo] = []
        for path in self.root.iterdir():
            if path.name.startswith(IMPORT_PREFIX):
                remove_if_stale(path)  # an import a killed process left half-built: no process holds it
                continue
            if not path.is_dir() or path.name.startswith("."):
                continue
            meta_path = path / SESSION_FILE
            problem = ""
            meta: dict[str, Any] = {}
            try:
                loaded = json_loads(meta_path.read_bytes())
                meta = loaded if isinstance(loaded, dict) else {}
                if not meta:
                    problem = "session.json is not an object"
            except (OSError, ValueError) as exc:
                if not (path / HISTORY_FILE).exists():
                    continue  # not a session folder
                problem = f"session.json unreadable: {exc}"
            hist = path / HISTORY_FILE
            updated = str(meta.get("updated") or "")
            if hist.exists():
                mtime = datetime.fromtimestamp(hist.stat().st_mtime, UTC).isoformat(timespec="milliseconds")
                updated = max(updated, mtime)
            out.append(
                SessionInfo(
                    id=path.name,
                    title=str(meta.get("title") or path.name),
                    path=path,
                    created=str(meta.get("created") or ""),
                    updated=updated,
                    message_count=count_file_lines(hist),
                    model=str(meta.get("model") or ""),
                    problem=problem,
                )
            )
        out.sort(key=lambda s: s.updated, reverse=True)
        return out


class StoredSessionStore(SessionIndex[StoredSession]):
    """Sessions opened for their files only (no token counting)."""

    session_class = StoredSession
