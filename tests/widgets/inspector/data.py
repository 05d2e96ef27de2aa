"""Files and archived messages shared by the inspector tests."""

from __future__ import annotations

from engine.workbench.rows import FileRow
from widgets.inspector import Inspector

FILES = [FileRow(**f) for f in [
    {"path": "tool_results/aaa.txt", "size": 120_000, "lines": 3000, "created": "2025-11-21T10:00:00+00:00",
     "tool": "bash", "message_id": "m3"},
    {"path": "tool_results/bbb.txt", "size": 4_000, "lines": 80, "created": "2025-11-21T11:00:00+00:00",
     "tool": "read_file", "message_id": "m9", "message_preview": "read src/app.py"},
    {"path": "tool_results/ccc.txt", "size": 60_000, "lines": 900, "created": "2025-11-20T09:00:00+00:00",
     "tool": "grep", "message_id": ""},
]]

FILE_TEXT = "\n".join(f"line {i}: value {i * 3}" for i in range(1, 201))


def cell(ins: Inspector, row: int, col: int) -> str:
    m = ins.files_view.model()
    return m.index(row, col).data()


def archived(day: str, n: int) -> list[dict]:
    roles = ["user", "assistant", "tool"]
    return [{"id": f"{day}-{i}", "role": roles[i % 3], "content": f"archived {i} about parsing",
             "ts": f"{day}T09:{i:02d}:00+00:00"} for i in range(n)]
