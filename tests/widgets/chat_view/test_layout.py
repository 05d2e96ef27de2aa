"""What a row shows (widgets/chat_view/layout.py): headers, tool blocks, calls, fonts."""

from __future__ import annotations

import json

import pytest

from tests.widgets.chat_view.rows import conversation, doc_texts, hotspot, msg, texts


def test_set_messages_skips_system_and_shows_tokens(view):
    view.set_messages(conversation(), {"m1": 12, "m2": 40, "m3": 900, "m4": 25})
    assert view.message_ids() == ["m1", "m2", "m3", "m4"]
    assert view.row_count() == 4
    assert "12 tok" in texts(view, "m1")
    assert any("900 tok" in t for t in texts(view, "m3"))
    # the assistant row lists its tool call with arguments; the call has a result
    call_line = next(t for t in texts(view, "m2") if t.startswith("⚙"))
    assert "read_file" in call_line and "src/app.py" in call_line and "no result" not in call_line
    # markdown of the assistant, plain text of the user
    assert doc_texts(view, "m4") == ["Here is what it does: main() starts the loop."]
    assert doc_texts(view, "m1") == ["Open **src/app.py** please"]
    view.set_tokens({"m1": 13})
    assert "13 tok" in texts(view, "m1")

def test_tool_block_collapses_expands_and_links_the_offloaded_file(view, qtbot):
    view.set_messages(conversation())
    collapsed = view.row_rect("m3").height()
    assert any("cut in the context" in t for t in texts(view, "m3"))
    assert doc_texts(view, "m3") == []  # collapsed: no full result document
    view.click("m3", hotspot(view, "m3", "toggle"))
    assert view.item("m3").expanded
    assert view.row_rect("m3").height() > collapsed
    docs = doc_texts(view, "m3")
    assert json.loads(docs[0]) == {"path": "src/app.py"}  # arguments, pretty
    assert docs[1] == "line 1\nline 2\nline 3\nline 4"  # the (cut) result as sent
    with qtbot.waitSignal(view.open_offload) as blocker:
        view.click("m3", hotspot(view, "m3", "offload"))
    assert blocker.args == ["tool_results/abc.txt"]
    view.click("m3", hotspot(view, "m3", "toggle"))
    assert not view.item("m3").expanded
    assert view.row_rect("m3").height() == collapsed

def test_tool_call_without_result_is_marked(view):
    call = {"id": "cx", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    view.set_messages([msg(1, "assistant", "", tool_calls=[call])])
    assert any("(no result)" in t for t in texts(view, "m1"))
    view.append_message(msg(2, "tool", "ok", tool_call_id="cx"))
    assert not any("(no result)" in t for t in texts(view, "m1"))

def test_running_tool_call_is_shown(view):
    call = {"id": "cr", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    view.set_messages([msg(1, "assistant", "", tool_calls=[call])])
    view.set_call_running("cr", True)
    assert any("(running…)" in t for t in texts(view, "m1"))
    view.set_call_running("cr", False)
    view.append_message(msg(2, "tool", "done", tool_call_id="cr"))
    line = next(t for t in texts(view, "m1") if t.startswith("⚙"))
    assert "running" not in line and "no result" not in line
    view.set_call_running("unknown", True)  # a call not shown: harmless

def test_real_trajectory_lists_every_tool_call(view, tmp_path):
    from engine.context.conversation import Session
    from engine.importer import import_transcript
    from tests.conftest import trajectory_files

    files = trajectory_files()
    if not files:
        pytest.skip("no trajectories in ../shared/data/trajectories")
    import_transcript(files[-1], session_dir=tmp_path / "s")
    session = Session.load(tmp_path / "s")
    messages = session.messages
    counts = session.token_counts()
    view.set_messages(messages, {m["id"]: c for m, c in zip(messages, counts, strict=True)})
    assert view.message_ids() == [m["id"] for m in messages]
    calls = [c for m in messages for c in m.get("tool_calls") or ()]
    assert len(calls) > 50
    listed = [t for m in messages if m.get("tool_calls") for t in texts(view, m["id"]) if t.startswith("⚙ ")]
    assert len(listed) == len(calls)
    assert all("(no result)" not in t for t in listed)
    tool_rows = [m for m in messages if m["role"] == "tool"]
    assert all(view.item(m["id"]).tokens > 0 for m in tool_rows)
    # scroll the whole run: every row lays out and paints
    sb = view.verticalScrollBar()
    sb.setValue(0)
    while sb.value() < sb.maximum():
        sb.setValue(sb.value() + sb.pageStep())
        view.viewport().repaint()
    assert view.is_at_bottom()

def test_font_change_remeasures_rows(view):
    view.set_messages(conversation())
    view.viewport().repaint()
    before = view.row_rect("m1").height()
    font = view.font()
    font.setPointSizeF(font.pointSizeF() * 2)
    view.setFont(font)
    view.viewport().repaint()
    assert view.row_rect("m1").height() > before + 15  # text lines doubled, padding did not


def test_a_long_follow_keeps_a_few_screens_of_rows_laid_out(view):
    """Each new row at the bottom is laid out and drawn; only the most recent few screens' layouts (with their text
    documents) are kept, and a row scrolled back to is laid out again, the same."""
    from widgets.chat_view.layout import LAYOUT_CACHE

    view.set_messages([msg(0, "user", "start")])
    first = texts(view, "m0")
    for i in range(1, 300):
        view.append_message(msg(i, "assistant" if i % 2 else "user", f"**answer** {i}\n\n" + "word " * 40))
        view.scroll_to_bottom()
        view.viewport().repaint()
    layouter = view.layouter()
    assert LAYOUT_CACHE <= 150 and len(layouter._cache) <= LAYOUT_CACHE
    assert sum(len(lay.docs) for _, lay in layouter._cache.values()) <= LAYOUT_CACHE
    assert "m0" not in layouter._cache
    assert texts(view, "m0") == first  # laid out again as it was
    assert doc_texts(view, "m299")[0].startswith("answer 299")


def test_a_follow_keeps_a_few_screens_of_rows_laid_out_not_a_fixed_count(view, qtbot):
    """The rows kept laid out are LAYOUT_SCREENS views' height of them (at least LAYOUT_MIN, at most LAYOUT_CACHE), not
    LAYOUT_CACHE rows in any window (150 rows and their documents: 1.2 MB more in a ten-minute follow in the
    benchmark's window); the rows on screen stay laid out (a paint lays out nothing again), the rows drawn are the
    same."""
    from widgets.chat_view.layout import LAYOUT_CACHE, LAYOUT_MIN, LAYOUT_SCREENS

    view.set_messages([msg(0, "user", "start")])
    for i in range(1, 300):
        view.append_message(msg(i, "assistant" if i % 2 else "user", f"**answer** {i}\n\n" + "word " * 40))
        view.scroll_to_bottom()
        view.viewport().repaint()
    layouter = view.layouter()
    kept = [lay.height for _, lay in layouter._cache.values()]
    screens = LAYOUT_SCREENS * view.viewport().height()
    assert LAYOUT_MIN <= len(kept) < LAYOUT_CACHE
    assert len(kept) == LAYOUT_MIN or sum(kept[1:]) <= screens
    assert set(view.visible_keys()) <= set(layouter._cache)
    built = layouter.layouts_built
    view.viewport().repaint()
    assert layouter.layouts_built == built  # the rows on screen were kept
    # a taller window keeps more rows (a few of its screens), never more than LAYOUT_CACHE
    view.resize(700, 3000)
    qtbot.waitUntil(lambda: view.viewport().height() > 2000)
    for i in range(300, 600):
        view.append_message(msg(i, "user", "one line"))
        view.scroll_to_bottom()
        view.viewport().repaint()
    taller = len(layouter._cache)
    assert LAYOUT_MIN < taller <= LAYOUT_CACHE
    assert set(view.visible_keys()) <= set(layouter._cache)
