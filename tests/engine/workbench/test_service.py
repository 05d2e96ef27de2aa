"""The service's shape: the read-only policy (one place every mutating intent asks), and the service as
parts it holds (flat classes, each intent in one part)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from engine.workbench import events as ev
from engine.workbench.analysis import AnalysisPart
from engine.workbench.commands import CommandsPart
from engine.workbench.compaction_ui import CompactionPart
from engine.workbench.core import WorkbenchCore
from engine.workbench.inspector import InspectorPart
from engine.workbench.keys import KeysPart
from engine.workbench.policy import MUTATING_INTENTS, READ_ONLY, READ_ONLY_COMMANDS, ReadOnlyPolicy
from engine.workbench.service import Workbench
from engine.workbench.sessions import SessionsPart
from engine.workbench.sources import SourcesPart
from engine.workbench.turns import TurnsPart
from tests.engine.workbench import claude_file as cf
from tests.engine.workbench.test_workbench import Rig, rig, server, settings  # noqa: F401  (fixtures)

# every mutating intent of the service and a call of it (the policy must refuse each on a view)
CALLS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "send": ("send", ("hello",)),
    "run_command": ("run_command", ("compact",)),
    "clear_session": ("clear_session", ()),
    "start_preview": ("start_preview", ()),
    "regenerate_preview": ("regenerate_preview", ()),
    "apply_preview": ("apply_preview", ()),
    "undo_compaction": ("undo_compaction", ()),
    "restore_messages": ("restore_messages", (["m1"],)),
}


def test_the_policy_refuses_each_mutating_intent_only_while_read_only() -> None:
    warned: list[str] = []
    read_only = [False]
    policy = ReadOnlyPolicy(lambda: read_only[0], warned.append)
    assert not any(policy.refuses(i) for i in MUTATING_INTENTS) and warned == []
    read_only[0] = True
    assert all(policy.refuses(i) for i in MUTATING_INTENTS)
    assert warned == [READ_ONLY] * len(MUTATING_INTENTS)
    assert policy.refuses("run_command", "compact") and policy.refuses("run_command", "clear")
    assert not any(policy.refuses("run_command", c) for c in READ_ONLY_COMMANDS)
    with pytest.raises(ValueError, match="not an intent"):
        policy.refuses("open_session")


def test_every_mutating_intent_is_tested() -> None:
    assert set(CALLS) == MUTATING_INTENTS


@pytest.mark.asyncio
@pytest.mark.parametrize("intent", sorted(CALLS))
async def test_a_source_view_refuses_each_mutating_intent(rig: Rig, tmp_path: Path, intent: str) -> None:  # noqa: F811
    path = cf.write_session(tmp_path / "claude")
    await rig.wb.open_source(path)
    view = rig.of(ev.SessionLoaded)[-1].view
    assert view.read_only and rig.wb.view is not None
    session = rig.wb.session
    assert session is not None
    before = [m.get("id") for m in session.messages]
    name, args = CALLS[intent]
    result = getattr(rig.wb, name)(*args)
    assert result in (None, False)
    assert rig.notices("warning")[-1:] == [READ_ONLY]
    assert not {"turn", "preview", "apply", "undo"} & set(rig.wb.tasks.names())
    assert rig.wb.session is session and [m.get("id") for m in session.messages] == before


@pytest.mark.asyncio
async def test_a_source_view_allows_the_commands_that_change_nothing(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    path = cf.write_session(tmp_path / "claude")
    await rig.wb.open_source(path)
    rig.wb.run_command("context")
    assert READ_ONLY not in rig.notices() and "system" in rig.notices("info")[-1].lower()


# --------------------------------------------------------------------------- the service as parts it holds

PARTS = (CompactionPart, SessionsPart, TurnsPart, CommandsPart, SourcesPart, InspectorPart, AnalysisPart, KeysPart)
OWN = {"subscribe", "task", "warm_up", "workspace", "next_snapshot", "start", "shutdown"}  # the core's, or composed


def _methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and inspect.isfunction(v)}


def test_the_service_and_its_parts_have_no_mixin_bases() -> None:
    for cls in (Workbench, WorkbenchCore, ReadOnlyPolicy, *PARTS):
        assert cls.__mro__ == (cls, object), cls


def test_no_public_intent_is_defined_twice() -> None:
    seen: dict[str, list[str]] = {}
    for part in PARTS:
        for name in _methods(part):
            seen.setdefault(name, []).append(part.__name__)
    assert {n: where for n, where in seen.items() if len(where) > 1} == {}
    # every intent of the service is handed to exactly one part (or is the core's)
    for name in _methods(Workbench) - OWN:
        assert len(seen.get(name, [])) == 1, name
    assert set(CALLS) <= _methods(Workbench)


@pytest.mark.asyncio
async def test_the_parts_share_one_core(rig: Rig) -> None:  # noqa: F811
    wb = rig.wb
    parts = [getattr(wb, n) for n in ("compaction", "sessions", "turns", "commands", "sources", "inspector",
                                      "analysis", "keys")]
    assert [type(p) for p in parts] == list(PARTS)
    assert all(p.core is wb.core for p in parts)
    assert all(p.doc is wb.doc for p in parts if hasattr(p, "doc")) and wb.doc is not None
    with_doc = [type(p).__name__ for p in parts if hasattr(p, "doc")]
    assert len(with_doc) == len(parts), with_doc  # every part reads what is open from the one document
    assert wb.sessions.compaction is wb.compaction and wb.sources.sessions is wb.sessions


@pytest.mark.asyncio
async def test_two_opens_that_raced_leave_one_session_open_and_the_other_closed(rig: Rig) -> None:  # noqa: F811
    """An import's open and a click's open finished one after the other: the later one is open, the earlier one
    closed (its lock released), never both held."""
    wb = rig.wb
    await wb.new_session()
    first = wb.session
    assert first is not None
    second = wb.store.create("raced")
    second.lock()
    wb.sessions.load(second)  # as a second open task would, without leaving the first
    assert wb.session is second and first.closed and not second.closed and wb.agent is not None
    assert rig.of(ev.SessionLoaded)[-1].view.id == second.id


@pytest.mark.asyncio
async def test_the_view_of_a_loaded_session_is_built_with_the_collector_paused(rig: Rig) -> None:  # noqa: F811
    """Every call's row is made at a load (a bulk build: no cyclic collection walks it meanwhile), and the
    collector is back before the window is told (its handler runs with it)."""
    import gc

    wb = rig.wb
    second = wb.store.create("paused")
    second.lock()
    seen: list[bool] = []
    build = wb.sessions.session_view

    def watched() -> Any:
        seen.append(gc.isenabled())
        return build()

    was = gc.isenabled()
    gc.enable()
    try:
        wb.sessions.session_view = watched  # type: ignore[method-assign]
        wb.sessions.load(second)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False] and after
    assert rig.of(ev.SessionLoaded)[-1].view.id == second.id
