"""An imported session's next-request bar is calibrated on its last call's provider figure.

Real session files of Claude Code and Codex, imported through the service; the next request holds
what the last reported call sent (the provider's own count) plus what came after it (its answer), so
the bar can never show less than the provider reported for that call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.agent import last_reported_request
from engine.model.snapshot import CALIBRATED
from engine.workbench import events as ev
from tests.engine.workbench.test_workbench import Rig, rig, server, settings  # noqa: F401  (fixtures)

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sessions"
FILES = [
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
    "claude-code/tool_heavy.jsonl",
    "codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
]


def _last_reported(events_path: Path) -> int:
    import json

    figures = [json.loads(line).get("provider_prompt_tokens") for line in events_path.read_text().splitlines()]
    return [f for f in figures if isinstance(f, int) and f > 0][-1]


@pytest.mark.asyncio
@pytest.mark.parametrize("name", FILES)
async def test_the_next_request_starts_from_the_last_provider_figure(rig: Rig, name: str) -> None:  # noqa: F811
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    await rig.wb.import_transcript(path)
    await rig.until(lambda: bool(rig.of(ev.SessionLoaded)))
    session = rig.wb.session
    assert session is not None
    request = last_reported_request(session)
    assert request is not None, "the last call's request is the head of the live history"
    history, reported = request
    assert reported == _last_reported(session.events_path)
    snap = rig.wb.next_snapshot()
    assert snap is not None
    assert snap.accuracy == CALIBRATED
    after = session.token_counts()[len(history):]  # what came after the last call, estimated
    prompt = snap.system + snap.summary + snap.history + snap.tools
    # the provider's figure + the estimate of the rest, scaled by the calibration ratio
    assert reported <= prompt <= reported + 2 * sum(after) + 16
    # the bar is drawn against the model that made it
    assert snap.window == rig.of(ev.SessionLoaded)[-1].view.state.snapshot.window


@pytest.mark.asyncio
async def test_a_native_session_is_not_calibrated_from_imports(rig: Rig) -> None:  # noqa: F811
    await rig.wb.new_session()
    session = rig.wb.session
    assert session is not None and last_reported_request(session) is None
    snap = rig.wb.next_snapshot()
    assert snap is not None and snap.accuracy != CALIBRATED


@pytest.mark.asyncio
async def test_each_imported_session_opened_in_turn_is_calibrated(rig: Rig) -> None:  # noqa: F811
    """The service remembers which session object it calibrated (not its id(), which a freed session's
    successor may get): every imported session opened after another is calibrated too."""
    paths = [SHARED / name for name in FILES[2:] + FILES[2:3]]
    if not all(p.exists() for p in paths):
        pytest.skip("the shared sessions are not here")
    for path in paths:
        await rig.wb.import_transcript(path)
        snap = rig.wb.next_snapshot()
        assert snap is not None and snap.accuracy == CALIBRATED, path.name
