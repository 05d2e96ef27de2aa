"""The Workbench service's small parts: named tasks, the throttle, approvals, the inspector readers."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from engine.workbench import events as ev
from engine.workbench.approvals import Approvals
from engine.workbench.inspector import InspectorError, offloaded_rel_path, read_offloaded_text
from engine.workbench.tasks import TaskGroup, TaskRunning
from engine.workbench.throttle import Throttle

NAME = "0123456789abcdef0123456789abcdef.txt"


# --------------------------------------------------------------------------- tasks


@pytest.mark.asyncio
async def test_a_named_task_replaces_its_predecessor_and_errors_are_reported() -> None:
    errors: list[tuple[str, str]] = []
    group = TaskGroup(lambda name, exc: errors.append((name, str(exc))))
    first = group.spawn("open", asyncio.sleep(10))
    second = group.spawn("open", asyncio.sleep(0), replace=True)
    await asyncio.wait([first, second])
    assert first.cancelled() and not second.cancelled()
    assert group.get("open") is None and errors == []

    async def boom() -> None:
        raise ValueError("bad")

    await asyncio.wait([group.spawn("apply", boom())])
    assert errors == [("apply", "bad")]


@pytest.mark.asyncio
async def test_close_cancels_every_task_and_silences_their_errors() -> None:
    errors: list[str] = []
    group = TaskGroup(lambda name, exc: errors.append(name))
    slow = group.spawn("turn", asyncio.sleep(10))
    group.spawn("preview", asyncio.sleep(10))
    assert group.names() == ["preview", "turn"]
    await group.close()
    assert slow.cancelled() and group.names() == [] and errors == []


@pytest.mark.asyncio
async def test_a_second_task_of_one_name_is_queued_replacing_or_refused() -> None:
    """Two imports at once never lose track of the first (the second waits for it; leaving the session cancels
    both, and closing waits for both); an open replaces the one running; a second undo is refused."""
    group = TaskGroup()
    order: list[str] = []

    async def step(name: str, delay: float) -> None:
        await asyncio.sleep(delay)
        order.append(name)

    first = group.spawn("import", step("first", 0.05), queue=True)
    second = group.spawn("import", step("second", 0), queue=True)
    await asyncio.wait([first, second])
    assert order == ["first", "second"] and group.names() == []  # queued: after the first, never beside it
    first = group.spawn("import", asyncio.sleep(10), queue=True)
    second = group.spawn("import", asyncio.sleep(10), queue=True)
    assert group.get("import") is second and group.names() == ["import"]
    await group.cancel_and_wait("import")
    assert first.cancelled() and second.cancelled() and group.names() == []
    undo = group.spawn("undo", asyncio.sleep(10))
    again = asyncio.sleep(10)
    with pytest.raises(TaskRunning):
        group.spawn("undo", again)
    assert again.cr_frame is None  # closed: never awaited, no warning
    assert group.cancel("undo") is undo
    a, b = group.spawn("open", asyncio.sleep(10)), group.spawn("open", asyncio.sleep(10), replace=True)
    await asyncio.sleep(0)
    assert a.cancelled() and group.get("open") is b
    await group.close()
    assert b.cancelled() and undo.cancelled()


# --------------------------------------------------------------------------- throttle


@pytest.mark.asyncio
async def test_the_throttle_folds_requests_into_one_update_per_interval() -> None:
    fired: list[int] = []
    throttle = Throttle(lambda: fired.append(1), interval=0.01)
    for _ in range(50):
        throttle.schedule()  # a burst of deltas, no await between them
    assert fired == [] and throttle.pending
    while throttle.pending:
        await asyncio.sleep(0.005)
    assert fired == [1]  # one update after the burst: the last request is never lost
    throttle.schedule()
    throttle.flush()
    assert fired == [1, 1] and not throttle.pending
    throttle.schedule()
    throttle.cancel()
    await asyncio.sleep(0.03)
    assert fired == [1, 1] and throttle.fired == 2


def test_without_a_running_loop_the_update_comes_at_once() -> None:
    fired: list[int] = []
    Throttle(lambda: fired.append(1)).schedule()
    assert fired == [1]


# --------------------------------------------------------------------------- approvals


@pytest.mark.asyncio
async def test_an_approval_is_a_future_the_answer_resolves() -> None:
    out: list[Any] = []
    approvals = Approvals(out.append)
    ask = asyncio.ensure_future(approvals.ask("write_file", {"path": "a.txt"}))
    await asyncio.sleep(0)
    request = out[-1]
    assert isinstance(request, ev.ApprovalRequested) and request.payload() == (
        request.request_id, "write_file", '{"path": "a.txt"}')
    assert approvals.pending() == [request.request_id]
    approvals.answer("unknown", False)
    approvals.answer(request.request_id, True)
    assert await ask is True and approvals.pending() == []


@pytest.mark.asyncio
async def test_withdrawing_cancels_the_open_requests() -> None:
    out: list[Any] = []
    approvals = Approvals(out.append)
    ask = asyncio.ensure_future(approvals.ask("run_shell", {"command": "ls"}))
    await asyncio.sleep(0)
    approvals.withdraw()
    with pytest.raises(asyncio.CancelledError):
        await ask
    assert isinstance(out[-1], ev.ApprovalsWithdrawn) and approvals.pending() == []


# --------------------------------------------------------------------------- inspector readers


def test_offloaded_paths_are_confined_to_tool_results(tmp_path: Path) -> None:
    assert offloaded_rel_path(tmp_path, f"tool_results/{NAME}") == f"tool_results/{NAME}"
    assert offloaded_rel_path(tmp_path, str(tmp_path / "tool_results" / NAME)) == f"tool_results/{NAME}"
    for bad in ("session.json", f"tool_results/../{NAME}", "/etc/passwd", f"tool_results/{NAME}.bak"):
        with pytest.raises(InspectorError, match="not an offloaded tool result"):
            offloaded_rel_path(tmp_path, bad)


def test_a_large_offloaded_file_is_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "tool_results").mkdir()
    (tmp_path / "tool_results" / NAME).write_bytes(b"a" * (3 * 1024 * 1024))
    rel, text = read_offloaded_text(tmp_path, f"tool_results/{NAME}", limit=2 * 1024 * 1024)
    assert rel == f"tool_results/{NAME}" and text.startswith("a" * 1000)
    assert text.endswith("[… the viewer shows the first 2 MB; open the file for all]")
    with pytest.raises(InspectorError, match="cannot read"):
        read_offloaded_text(tmp_path, "tool_results/" + "f" * 32 + ".txt")


def test_every_service_event_is_a_dataclass_with_a_payload() -> None:
    kinds = [v for v in vars(ev).values() if isinstance(v, type) and issubclass(v, ev.WorkbenchEvent)]
    assert len(kinds) > 20
    for kind in kinds:
        assert dataclasses.is_dataclass(kind)
        fields = [f.name for f in dataclasses.fields(kind)]
        sample = kind(*[None] * len(fields))
        assert isinstance(sample.payload(), tuple)
