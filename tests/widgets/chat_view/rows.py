"""Rows and lookups shared by the chat view tests."""

from __future__ import annotations

import json

from PySide6.QtCore import QPointF

from widgets.chat_view import ChatView


def msg(i: int, role: str = "user", content: str | None = None, **kw) -> dict:
    m = {"id": f"m{i}", "role": role, "content": content if content is not None else f"message {i}",
         "ts": f"2025-11-21T10:{i // 60 % 60:02d}:{i % 60:02d}+00:00"}
    m.update(kw)
    return m

def texts(view: ChatView, key: str) -> list[str]:
    item = view.item(key)
    lay = view.layouter().layout(item, view.row_width())
    return [op.b for op in lay.ops if op.kind == "text"]

def doc_texts(view: ChatView, key: str) -> list[str]:
    item = view.item(key)
    lay = view.layouter().layout(item, view.row_width())
    return [doc.toPlainText() for _, doc in lay.docs]

def hotspot(view: ChatView, key: str, action: str) -> QPointF:
    for rect, act, _payload in view.hotspots(key):
        if act == action:
            return rect.center()
    raise AssertionError(f"no {action} hotspot on {key}: {view.hotspots(key)}")

def conversation() -> list[dict]:
    call = {"id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "src/app.py"})}}
    return [
        {"role": "system", "content": "you are helpful", "id": "sys"},
        msg(1, "user", "Open **src/app.py** please"),
        msg(2, "assistant", "Reading it.", tool_calls=[call]),
        msg(3, "tool", "line 1\nline 2\nline 3\nline 4", tool_call_id="c1",
            offload={"path": "tool_results/abc.txt", "bytes": 120_000, "lines": 3000}),
        msg(4, "assistant", "Here is what it does: `main()` starts the loop."),
    ]
