"""A capture of the recording proxy opened in the service as a source, live: what the proxy appends (each exchange
a line) shows as new messages and timeline columns without reloading the view; every column's prefix exact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine.capture.files import CaptureWriter
from engine.sources.readers import read_source
from tests.engine.sources.test_capture import TOOLS, anthropic_answer, exchange
from tests.engine.workbench.test_sources import Shown
from tests.engine.workbench.test_workbench import Rig, rig, server, settings  # noqa: F401  (fixtures)


def turns(n: int) -> list[dict[str, Any]]:
    """``n`` exchanges of one conversation: each request resends the history and adds a user message."""
    body: dict[str, Any] = {"model": "claude-x", "max_tokens": 8000, "system": "Agent.", "tools": TOOLS,
                            "messages": [{"role": "user", "content": "q0"}]}
    out = []
    messages = list(body["messages"])
    for i in range(1, n + 1):
        answer, usage = anthropic_answer(i, f"a{i}")
        out.append(exchange(i, "anthropic", "/v1/messages", dict(body, messages=list(messages)), answer, usage))
        messages += [{"role": "assistant", "content": answer["content"]}, {"role": "user", "content": f"q{i}"}]
    return out


@pytest.mark.asyncio
async def test_a_capture_is_followed_as_the_proxy_writes_it(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "live-capture.jsonl"
    records = turns(6)
    writer = CaptureWriter(path, info={"agent": "claude"})
    for rec in records[:2]:
        writer.append(rec)
    shown = Shown(rig)
    await rig.wb.open_source(path)
    shown.update()
    assert len(shown.calls) == 2
    for rec in records[2:]:
        writer.append(rec)
        await asyncio.sleep(0.4)
    writer.close()
    final = read_source(path, "proxy-capture")

    def caught_up() -> bool:
        shown.update()
        return len(shown.calls) == len(final.calls) == 6 and len(shown.messages) == len(final.messages)

    await rig.until(caught_up, timeout=20)
    assert shown.calls == [c.prompt_tokens for c in final.calls]
    assert shown.loads == 1 and shown.incremental > 0  # appended, never reloaded whole
    assert rig.wb.session is not None
    events = [json.loads(x) for x in (rig.wb.session.path / "events.jsonl").read_text().splitlines()]
    assert [e["prefix_source"] for e in events] == ["file"] * 6
    assert len(set(shown.messages)) == len(shown.messages) == 12  # q0, a1, then (question, answer) × 5
