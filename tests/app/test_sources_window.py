"""Sources in the real window (offscreen): the Sources tab lists the agent sessions of a temp HOME,
opening one shows it read-only (chat, timeline, inspector; input disabled; the service refuses to
send), a file the test appends to is followed on screen, Continue makes a writable session, a
subagent opens from its Task call and back."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.main_window import MainWindow
from engine.sources.readers import read_source
from engine.store.config import Settings
from tests.app.test_main_window import close, make_window
from widgets.sources_list import PATH_ROLE

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "sessions"
BIG = SHARED / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CODEX = SHARED / "codex" / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not here")
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with one Claude Code project (short + tool_heavy) and one Codex rollout."""
    h = tmp_path / "home"
    project = h / ".claude" / "projects" / "-work-spotter"
    project.mkdir(parents=True)
    for name in ("short.jsonl", "tool_heavy.jsonl"):
        shutil.copyfile(_need(SHARED / "claude-code" / name), project / name)
    codex = h / ".codex" / "sessions" / "2026" / "02" / "23"
    codex.mkdir(parents=True)
    shutil.copyfile(_need(CODEX), codex / CODEX.name)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return h


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Any:
    window = make_window(qtbot, fake_settings, workspace)
    yield window
    close(qtbot, window)


def open_source(qtbot: Any, win: MainWindow, path: Path) -> Any:
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000) as blocker:
        win.controller.open_source(str(path))
    return blocker.args[0]


def test_the_sources_tab_lists_the_sessions_grouped(qtbot: Any, win: MainWindow, home: Path) -> None:
    sources = win.sessions.sources
    with qtbot.waitSignal(win.controller.sources_listed, timeout=20_000):
        win.sessions.tabs.setCurrentWidget(sources)  # the first look scans (then every 30 s)
    paths = sources.paths()
    assert len(paths) == 3 and any(p.endswith(CODEX.name) for p in paths)
    groups = [sources.tree.topLevelItem(i).text(0) for i in range(sources.tree.topLevelItemCount())]
    assert sorted(groups) == ["Claude Code", "Codex"]
    short = sources.item_for(str(home / ".claude" / "projects" / "-work-spotter" / "short.jsonl"))
    assert short is not None
    assert "mix phx.server doesnt seem to start" in short.text(0) and short.text(0).startswith("● ")
    assert short.text(1) == "live" and short.text(2) == "13 %"
    assert short.parent().text(0) == "spotter"
    # opening from the list shows it read-only
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000):
        sources.set_current(str(short.data(0, PATH_ROLE)))
        sources.open_button.click()
    assert win.controller.session is not None and win.sources_wiring.view.read_only  # type: ignore[attr-defined]


def test_files_the_scan_could_not_read_are_said_under_the_list(qtbot: Any, win: MainWindow, home: Path) -> None:
    import os

    project = home / ".claude" / "projects" / "-work-spotter"
    os.mkfifo(project / "pipe.jsonl")
    (project / "zero.jsonl").symlink_to("/dev/zero")
    sources = win.sessions.sources
    with qtbot.waitSignal(win.controller.sources_listed, timeout=20_000) as blocker:
        win.sessions.tabs.setCurrentWidget(sources)
    rows, problems = blocker.args
    assert len(rows) == 3 and len(sources.paths()) == 3  # every other session still listed
    assert sorted(Path(p.path).name for p in problems) == ["pipe.jsonl", "zero.jsonl"]
    assert sources.problems_label.isVisible() and sources.problems_label.text().startswith(
        "⚠ 2 files could not be read")
    tip = sources.problems_label.toolTip()
    assert f"{project / 'pipe.jsonl'}: not a regular file (a FIFO (named pipe)): not read" in tip
    assert f"{project / 'zero.jsonl'}: not a regular file (a character device): not read" in tip


def test_a_session_file_whose_name_is_not_utf8_is_listed_and_opens(qtbot: Any, win: MainWindow, home: Path) -> None:
    import os

    odd = home / ".claude" / "projects" / "-work-spotter" / os.fsdecode(b"odd-\xff.jsonl")
    shutil.copyfile(_need(SHARED / "claude-code" / "short.jsonl"), odd)
    sources = win.sessions.sources
    with qtbot.waitSignal(win.controller.sources_listed, timeout=20_000):
        win.sessions.tabs.setCurrentWidget(sources)
    assert str(odd) in sources.paths()  # the path whole, not what a Qt string keeps of it
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000) as blocker:
        sources.set_current(str(odd))
        sources.open_button.click()
    view = blocker.args[0]
    assert view.read_only and view.source.path == str(odd) and len(view.timeline) == 1


@pytest.mark.parametrize("name", [
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "claude-code/subagent.jsonl",
    "codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
    "openhands/basic.json",
    "swe-agent/marshmallow-1867.function_calling.traj",
])
def test_each_kind_opens_read_only_in_the_window(qtbot: Any, win: MainWindow, name: str) -> None:
    path = _need(SHARED / name)
    fmt = name.split("/")[0]
    src = read_source(path, fmt)  # type: ignore[arg-type]
    chart = win.ensure_chart()
    view = open_source(qtbot, win, path)
    chart.flush()
    win.chat.flush()
    assert len(win.chat.message_ids()) == len(src.messages)
    assert chart.column_count() == len(src.calls) > 0
    assert not win.input.isEnabled() and win.input.placeholder().startswith("Read-only")
    bar = win.sources_wiring.bar  # type: ignore[attr-defined]
    assert bar.isVisible() and "Read-only view of" in bar.text() and "Continue in ctxbench" in bar.text()
    assert view.id not in win.sessions.session_ids()
    assert "(read-only)" in win.windowTitle()
    assert win.inspector is not None
    assert win.controller.send("hello") is False
    qtbot.waitUntil(lambda: any("read-only" in t for _, t in win.notices), timeout=2000)
    win.controller.run_command("compact")
    assert win.controller.preview is None and win.controller.task("preview") is None


def test_a_followed_file_grows_on_screen_nothing_twice(qtbot: Any, win: MainWindow, tmp_path: Path) -> None:
    lines = _need(BIG).read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    start = len(lines) // 2
    live.write_bytes(b"".join(lines[:start]))
    chart = win.ensure_chart()
    open_source(qtbot, win, live)
    qtbot.waitUntil(lambda: "live" in win.sources_wiring.live_label.text(), timeout=5000)  # type: ignore[attr-defined]
    at = start
    for burst in (20, 1, 35):
        with open(live, "ab") as fh:
            fh.write(b"".join(lines[at:at + burst]))
        at += burst
        qtbot.wait(500)
    line = lines[at]
    with open(live, "ab") as fh:
        fh.write(line[:40])
    qtbot.wait(500)
    with open(live, "ab") as fh:
        fh.write(line[40:])
        fh.write(b"".join(lines[at + 1:at + 30]))
    final = read_source(live, "claude-code")

    def caught_up() -> bool:
        chart.flush()
        return chart.column_count() == len(final.calls) and len(win.chat.message_ids()) == len(final.messages)

    qtbot.waitUntil(caught_up, timeout=20_000)
    qtbot.wait(600)
    win.chat.flush()
    ids = win.chat.message_ids()
    assert len(ids) == len(set(ids)) == len(final.messages)
    assert list(chart.provider_series()[-3:]) == [c.prompt_tokens for c in final.calls[-3:]]
    # truncated and rewritten: read again
    other = _need(SHARED / "claude-code" / "short.jsonl").read_bytes()
    with open(live, "r+b") as fh:
        fh.truncate(0)
        fh.write(other)
    want = read_source(live, "claude-code")
    qtbot.waitUntil(lambda: len(win.chat.message_ids()) == len(want.messages), timeout=10_000)
    chart.flush()
    assert chart.column_count() == len(want.calls)


def test_continue_in_ctxbench_and_the_preview(qtbot: Any, win: MainWindow) -> None:
    path = _need(SHARED / "claude-code" / "tool_heavy.jsonl")
    shown = open_source(qtbot, win, path)
    bar = win.sources_wiring.bar  # type: ignore[attr-defined]
    with qtbot.waitSignal(win.controller.preview_started, timeout=30_000):  # over the 8,000-token window
        bar.continue_button.click()
    qtbot.waitUntil(lambda: win.input.isEnabled(), timeout=10_000)
    view = win.sources_wiring.view  # type: ignore[attr-defined]
    assert not view.read_only and view.id in win.sessions.session_ids()
    assert len(view.messages) == len(shown.messages)
    assert not bar.isVisible() and win.sources_wiring.live_label.isHidden()  # type: ignore[attr-defined]


def test_a_subagent_opens_and_back(qtbot: Any, win: MainWindow) -> None:
    parent = open_source(qtbot, win, _need(BIG))
    rel = next(m["subagent"]["session"] for m in parent.messages
               if isinstance(m.get("subagent"), dict) and m["subagent"].get("session"))
    chart = win.ensure_chart()
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000) as blocker:
        if hasattr(win.chat, "subagent_requested"):
            win.chat.subagent_requested.emit(rel)
        else:
            win.controller.open_subagent(rel)
    child = blocker.args[0]
    chart.flush()
    assert child.read_only and chart.column_count() == len(child.timeline) == 13
    bar = win.sources_wiring.bar  # type: ignore[attr-defined]
    assert bar.parent_button.isVisible() and "subagent" in bar.text()
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000):
        bar.parent_button.click()
    chart.flush()
    assert chart.column_count() == len(parent.timeline) and not bar.parent_button.isVisible()


def test_the_file_watcher_wakes_the_follow_at_once(
    qtbot: Any, win: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With polling slowed to a minute, an appended line still reaches the chat: the window's
    QFileSystemWatcher tells the service, which looks at the file at once."""
    from engine.workbench import sources

    monkeypatch.setattr(sources, "FOLLOW_INTERVAL", 60.0)
    lines = _need(BIG).read_bytes().splitlines(keepends=True)
    live = tmp_path / "watched.jsonl"
    live.write_bytes(b"".join(lines[:100]))
    open_source(qtbot, win, live)
    wiring = win.sources_wiring  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: wiring.watcher.files() == [str(live)], timeout=5000)
    before = len(win.chat.message_ids())
    with open(live, "ab") as fh:
        fh.write(b"".join(lines[100:140]))
    want = read_source(live, "claude-code")
    assert len(want.messages) > before
    qtbot.waitUntil(lambda: len(win.chat.message_ids()) == len(want.messages), timeout=10_000)


def test_a_claude_code_2_1_file_its_tools_cost_attachments_and_compaction(qtbot: Any, win: MainWindow,
                                                                            tmp_path: Path) -> None:
    from tests.engine.workbench import claude_file as cf

    path = cf.write_session(tmp_path / "proj")
    view = open_source(qtbot, win, path)
    assert view.imported is not None and view.imported.agent_cost_usd == pytest.approx(cf.TOTAL_USD)
    assert win.status.texts()["agent_cost"] == f"agent's cost: ${cf.TOTAL_USD:.4f}"
    assert cf.MODEL in win.status.cost_label.toolTip()
    tools = win.inspector.tools
    assert not tools.definitions_pane.isHidden() and "from the file (as sent)" in tools.definitions_label.text()
    assert [r[0] for r in tools.definition_rows() if not r[0].startswith(" ")] == [
        "System prompt", "Built-in tools (2)", "MCP server github (2)", "MCP server slack (1)"]
    win.chat.flush()
    attachments = [k for k in win.chat.message_ids() if (win.chat.item(k).msg or {}).get("attachment")]
    assert len(attachments) == 2
    marker = win.chat.item(win.chat.marker_ids()[0])
    assert marker is not None and marker.event is not None and marker.event.post_tokens == cf.POST_TOKENS
    # a ctxbench session (not imported): no cost, no definitions
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000):
        win.controller.new_session()
    assert win.status.cost_label.isHidden() and tools.definitions_pane.isHidden()


def test_the_tools_tab_is_attributed_again_only_when_it_is_on_screen(qtbot: Any, win: MainWindow,
                                                                     tmp_path: Path) -> None:
    """The Tools tab's attribution (a read of the whole session folder) is asked for only while the tab is on
    screen: not when a session opens behind another tab, nor for a followed file's new calls; what changed while it
    was hidden is attributed once, when it shows, and again as calls come while it is on screen."""
    lines = _need(BIG).read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    start = len(lines) // 2
    live.write_bytes(b"".join(lines[:start]))
    inspector = win.inspector
    inspector.setCurrentWidget(inspector.files)  # another tab of the inspector in front
    analysis = win.controller.service.analysis
    open_source(qtbot, win, live)
    chart = win.ensure_chart()
    qtbot.waitUntil(lambda: chart.column_count() > 0, timeout=10_000)
    qtbot.wait(500)
    assert analysis.tools_computed == 0  # opened behind another tab: not attributed
    inspector.setCurrentWidget(inspector.tools)
    qtbot.waitUntil(lambda: analysis.tools_computed == 1, timeout=10_000)  # shown: the opened session, once
    qtbot.wait(300)
    before = analysis.tools_computed
    inspector.setCurrentWidget(inspector.files)
    columns = chart.column_count()
    with open(live, "ab") as fh:
        fh.write(b"".join(lines[start:start + 60]))
    qtbot.waitUntil(lambda: chart.column_count() > columns, timeout=10_000)
    qtbot.wait(1500)
    assert analysis.tools_computed == before  # hidden: not attributed
    inspector.setCurrentWidget(inspector.tools)  # shown: the calls it missed, attributed now
    qtbot.waitUntil(lambda: analysis.tools_computed == before + 1, timeout=10_000)
    columns = chart.column_count()
    with open(live, "ab") as fh:
        fh.write(b"".join(lines[start + 60:start + 120]))
    qtbot.waitUntil(lambda: chart.column_count() > columns, timeout=10_000)
    qtbot.waitUntil(lambda: analysis.tools_computed >= before + 2, timeout=10_000)  # on screen: as calls come


def test_a_compaction_of_a_followed_file_attributes_the_tools_only_when_the_tab_is_on_screen(
        qtbot: Any, win: MainWindow, tmp_path: Path) -> None:
    """A compaction the followed file gains is drawn (chart, chat) without the Tools tab's attribution (a read of the
    whole session folder: 25–40 MB for a while at 30 MB) while the tab is hidden; attributed once when it shows."""
    lines = _need(BIG).read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"compact_boundary"' in line)
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"".join(lines[:at - 20]))
    inspector = win.inspector
    inspector.setCurrentWidget(inspector.files)
    analysis = win.controller.service.analysis
    open_source(qtbot, win, live)
    chart = win.ensure_chart()
    qtbot.waitUntil(lambda: chart.column_count() > 0, timeout=10_000)
    qtbot.wait(300)
    before, markers = analysis.tools_computed, len(win.chat.marker_ids())
    assert before == 0  # opened behind another tab: not attributed either
    with open(live, "ab") as fh:
        fh.write(b"".join(lines[at - 20:at + 40]))
    qtbot.waitUntil(lambda: len(win.chat.marker_ids()) > markers, timeout=10_000)  # the compaction is drawn
    qtbot.wait(1500)
    assert analysis.tools_computed == before  # hidden: not attributed
    inspector.setCurrentWidget(inspector.tools)
    qtbot.waitUntil(lambda: analysis.tools_computed == before + 1, timeout=10_000)


def test_every_list_of_agents_the_window_shows_is_the_registrys(qtbot: Any, win: MainWindow) -> None:
    """Where Sources looks (said when it finds nothing), whose own cost the Sources list and the usage view show
    (the same agents in both), the agents Open reads and About names: each from engine.sources.formats."""
    from engine.sources import formats

    sources = win.sessions.sources
    sources.set_sources([])
    text = sources.empty_label.text()
    for agent, shown in formats.listed_places():
        assert f"\n{agent}: {shown}" in text
    assert "Qwen Code: ~/.qwen/projects" in text and "Pi: ~/.pi/agent/sessions" in text
    cost_sources = sources.tree.headerItem().toolTip(3)
    view = win.usage_wiring.ensure_view()  # type: ignore[attr-defined]
    rows = view.sessions.rows
    tips = [rows.headerData(i, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
            for i in range(rows.columnCount())]
    cost_usage = next(t for t in tips if t and t.startswith("The agent's own cost, from its cost records"))
    said = f"({formats.cost_recorded_by()})"
    assert cost_sources.endswith(said) and cost_usage.endswith(said)  # (one fact, two views: the same agents)
    for agent in ("Claude Code", "Cline", "OpenCode", "Pi"):
        assert agent in said
    assert "Codex" not in said  # (Codex writes no cost)
    assert formats.spoken_list(formats.importable()) in win.open_action.toolTip()
    about = win.help_wiring.show_about()  # type: ignore[attr-defined]
    from PySide6.QtWidgets import QLabel

    assert any(formats.spoken_list(formats.names(in_usage=True)) in label.text()
               for label in about.findChildren(QLabel))
    about.close()
