"""The answers of the usage index's queries, kept beside it for the next process that asks the same.

``ctxbench usage`` is run often and mostly against an index that did not change since the last run (a status
line, a script, a person looking again): its answer is then the last one. :func:`recall` gives an answer kept for
the index's current manifest token (:class:`engine.usage.index.Manifest`: every write of the index makes a new
one) and the same question; :func:`keep` keeps one. An answer found is exactly what the query returned, as its JSON
value (what the CLI prints: dates and times as their text), so the process neither starts DuckDB nor reads a
Parquet file.

Kept in ``<index>/answers.json``: ``{"version", "token", "answers": {question: answer}}``, for one token only (a new
token drops the others), at most :data:`KEPT` questions. It is a cache: written atomically without fsync, and a
file that cannot be read, of another version or another token, is as none (the question is asked again).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from engine.store.fsutil import atomic_write_bytes

log = logging.getLogger(__name__)

ANSWERS = "answers.json"
VERSION = 1
KEPT = 32  # questions kept per token (the most recently kept)
MAX_BYTES = 8 * 2**20  # a larger file is not read (an answer per session of a large index: asked again)


def question(*parts: Any) -> str:
    """The key of a question (its parts as JSON: a group, a first day, …)."""
    return json.dumps(parts, default=str, separators=(",", ":"))


def as_json(value: Any) -> Any:
    """``value`` as the JSON value the CLI prints of it (a date or a time as its text)."""
    return json.loads(json.dumps(value, default=str))


def _read(root: Path) -> dict[str, Any]:
    path = root / ANSWERS
    try:
        if path.stat().st_size > MAX_BYTES:
            return {}
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("answers"), dict):
        return {}
    return data


def recall(root: Path, token: str, key: str) -> Any | None:
    """The answer kept for ``key`` with the index at ``token``; None when there is none."""
    if not token:
        return None
    data = _read(root)
    if data.get("token") != token:
        return None
    return data["answers"].get(key)


def keep(root: Path, token: str, key: str, answer: Any) -> None:
    """Keep ``answer`` (a JSON value: see :func:`as_json`) for ``key`` with the index at ``token``. Nothing is kept
    when the index has no token, or when the folder cannot be written (said in the log)."""
    if not token:
        return
    data = _read(root)
    answers: dict[str, Any] = data["answers"] if data.get("token") == token else {}
    answers.pop(key, None)
    answers[key] = answer
    while len(answers) > KEPT:
        answers.pop(next(iter(answers)))
    body = json.dumps({"version": VERSION, "token": token, "answers": answers}, ensure_ascii=True,
                      separators=(",", ":")).encode()
    try:
        if root.is_dir():
            atomic_write_bytes(root / ANSWERS, body, durable=False)
    except OSError as exc:
        log.info("usage answers not kept in %s: %s", root, exc)
