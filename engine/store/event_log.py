"""Reading a session's ``events.jsonl`` as typed records (:mod:`engine.model.records`): the one reader every
view, export and usage figure goes through. A torn, non-JSON or invalid line is skipped and described; the
other lines are kept."""

from __future__ import annotations

from pathlib import Path

from engine.model.records import Record, RecordError, parse_record
from engine.store.fsutil import json_loads

EVENTS_FILE = "events.jsonl"


def read_records(path: Path, problems: list[str] | None = None, label: str = EVENTS_FILE) -> list[Record]:
    """Every record of an ``events.jsonl`` file, oldest first; [] without the file. A line that is torn, not
    JSON or not a record is skipped and described in ``problems`` (``"events.jsonl line <n>: …"``); the other
    lines are kept."""
    path = Path(path)
    if not path.exists():
        return []
    out: list[Record] = []
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            out.append(parse_record(json_loads(raw)))
        except RecordError as exc:
            if problems is not None:
                what = f"a {exc.kind} record was skipped ({exc.detail})" if exc.kind else f"skipped: {exc}"
                problems.append(f"{label} line {n}: {what}")
        except ValueError as exc:  # not JSON (json's ValueError, a torn last line)
            if problems is not None:
                problems.append(f"{label} line {n}: not JSON ({exc})")
    return out


def folder_records(folder: Path, problems: list[str] | None = None) -> list[Record]:
    """The records of a session folder's ``events.jsonl`` (:func:`read_records`)."""
    return read_records(Path(folder) / EVENTS_FILE, problems)
