from __future__ import annotations

import json
import random
import statistics
import time

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QGuiApplication, QTextDocument

from widgets.chat_view import ChatView, HeightIndex, SafeTextDocument
from widgets.theme import DARK, LIGHT


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


@pytest.fixture
def view(qtbot):
    v = ChatView(pal=LIGHT)
    qtbot.addWidget(v)
    v.resize(700, 600)
    v.show()
    qtbot.waitExposed(v)
    return v


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


def test_mouse_click_on_a_link_hotspot(view, qtbot):
    view.set_messages(conversation())
    view.scroll_to_message("m3")
    rect = view.row_rect("m3")
    local = hotspot(view, "m3", "offload")
    with qtbot.waitSignal(view.open_offload):
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                         pos=QPointF(local.x(), rect.top() + local.y()).toPoint())


def test_tool_call_without_result_is_marked(view):
    call = {"id": "cx", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    view.set_messages([msg(1, "assistant", "", tool_calls=[call])])
    assert any("(no result)" in t for t in texts(view, "m1"))
    view.append_message(msg(2, "tool", "ok", tool_call_id="cx"))
    assert not any("(no result)" in t for t in texts(view, "m1"))


def test_streaming_is_shown_at_once(view):
    # the chat view does not throttle (the controller does): each delta is in the row at once
    view.set_messages([msg(1)])
    view.stream_delta("a1", "Hello")
    assert view.item("a1").msg["content"] == "Hello"
    for word in [", ", "**world**"]:
        view.stream_delta("a1", word)
    item = view.item("a1")
    assert item is not None and item.streaming
    assert item.msg["content"] == "Hello, **world**"
    assert doc_texts(view, "a1") == ["Hello, world"]
    assert "streaming…" in " ".join(texts(view, "a1"))
    view.stream_delta("a1", "think", reasoning=True)
    view.end_stream("a1")
    assert view.item("a1").msg["reasoning_content"] == "think"
    assert not view.item("a1").streaming
    # the final message replaces the streamed one
    view.update_message({"id": "a1", "role": "assistant", "content": "Hello, world!", "interrupted": True}, 7)
    assert doc_texts(view, "a1") == ["Hello, world!"]
    header = " ".join(texts(view, "a1"))
    assert "interrupted" in header and "7 tok" in header


def test_streaming_grows_the_row_and_sticks_to_the_bottom(view, qtbot):
    view.set_messages([msg(i, "user", "x " * 50) for i in range(40)])
    qtbot.waitUntil(view.is_at_bottom, timeout=1000)
    for _ in range(30):
        view.stream_delta("a", "more words in a growing answer\n\n")
        view.flush()
        QGuiApplication.processEvents()
    assert view.is_at_bottom()
    assert view.visible_keys()[-1] == "a"
    assert view.row_rect("a").height() > 200


def test_scrolled_up_view_stays_put_when_messages_arrive(view, qtbot):
    view.set_messages([msg(i, "user", "y " * 80) for i in range(60)])
    view.scroll_to_message("m10")
    QGuiApplication.processEvents()
    top_key = view.visible_keys()[0]
    before = view.verticalScrollBar().value()
    for i in range(60, 70):
        view.append_message(msg(i, "assistant", "z " * 80))
    view.stream_delta("s", "streamed while the user reads")
    view.flush()
    QGuiApplication.processEvents()
    assert view.visible_keys()[0] == top_key
    assert view.verticalScrollBar().value() == before
    view.scroll_to_bottom()
    QGuiApplication.processEvents()
    assert view.visible_keys()[-1] == "s"


def test_compaction_marker_links_and_undo(view, qtbot):
    view.set_messages(conversation())
    ev = {"id": "cmp1", "trigger": "manual", "tokens_before": 42_000, "tokens_after": 9_000,
          "messages_compacted": 32, "messages_kept": 4, "duration_ms": 1800, "result": "summarized",
          "summary": "## Goal\nship"}
    key = view.add_compaction_marker(ev, undoable=True, after_message_id="m2")
    assert key == "cmp1"
    assert [it.key for it in view.chat_model().items()][2] == "cmp1"
    line = " ".join(texts(view, "cmp1"))
    assert "manual" in line and "42,000 → 9,000 tokens (-79%)" in line
    assert "32 messages compacted, 4 kept" in line
    with qtbot.waitSignal(view.summary_requested) as blocker:
        view.click("cmp1", hotspot(view, "cmp1", "summary"))
    assert blocker.args[0]["summary"] == "## Goal\nship"
    with qtbot.waitSignal(view.undo_requested) as blocker:
        view.click("cmp1", hotspot(view, "cmp1", "undo"))
    assert blocker.args == ["cmp1"]
    view.update_compaction_marker("cmp1", {**ev, "result": "undone"}, undoable=False)
    assert [a for _, a, _ in view.hotspots("cmp1")] == ["summary"]
    assert view.remove_compaction_marker("cmp1")
    assert view.marker_ids() == []


def test_markers_are_placed_by_time_when_loading(view):
    msgs = [msg(i) for i in range(1, 6)]
    marker = {"id": "k", "trigger": "auto", "tokens_before": 5, "tokens_after": 2, "ts": msgs[2]["ts"] + "x"}
    view.set_messages(msgs, markers=[marker])
    assert [it.key for it in view.chat_model().items()] == ["m1", "m2", "m3", "k", "m4", "m5"]
    failed = {"id": "f", "trigger": "reactive", "result": "failed", "reason": "summary lacked headings"}
    view.add_compaction_marker(failed, undoable=True)
    assert "summary lacked headings" in texts(view, "f")
    assert "undo" not in [a for _, a, _ in view.hotspots("f")]  # a failed compaction changed nothing


def test_markdown_loads_no_resource(view):
    text = (
        "look ![local](file:///etc/hostname) and ![remote](https://example.com/x.png)\n\n"
        '<img src="file:///etc/passwd"> [site](https://example.com) [file](file:///etc/passwd)'
    )
    view.set_messages([msg(1, "assistant", text)])
    view.viewport().repaint()
    item = view.item("m1")
    lay = view.layouter().layout(item, view.row_width())
    doc = lay.docs[0][1]
    assert isinstance(doc, SafeTextDocument)
    doc.documentLayout().documentSize()  # lay out images: every request must be refused
    assert any("etc/hostname" in u for u in doc.refused)
    assert any("example.com/x.png" in u for u in doc.refused)
    from PySide6.QtCore import QUrl

    assert doc.resource(QTextDocument.ResourceType.ImageResource, QUrl("file:///etc/hostname")) is None
    # raw HTML is not interpreted: the <img> tag stays text
    assert "<img" in doc.toPlainText()
    # links: http(s) is reported to the app, file: is ignored
    links = []
    view.link_activated.connect(links.append)
    view.activate(item, "link", "https://example.com")
    view.activate(item, "link", "file:///etc/passwd")
    assert links == ["https://example.com"]


def test_safe_document_refuses_directly():
    doc = SafeTextDocument()
    from PySide6.QtCore import QUrl

    image = int(QTextDocument.ResourceType.ImageResource)
    assert doc.loadResource(image, QUrl("file:///etc/hostname")) is None
    doc.set_markdown("![a](file:///etc/hostname)")
    doc.setTextWidth(300)
    doc.documentLayout().documentSize()
    assert doc.refused


def test_remove_and_out_of_context(view):
    view.set_messages(conversation())
    view.set_out_of_context(["m1", "m2"])
    assert view.item("m1").out_of_context and not view.item("m4").out_of_context
    assert any("archived" in t for t in texts(view, "m1"))
    assert view.remove_message("m1")
    assert view.message_ids() == ["m2", "m3", "m4"]
    assert not view.remove_message("nope")
    view.clear()
    assert view.row_count() == 0


def test_copy_item(view):
    view.set_messages(conversation())
    assert view.copy_item("m2").startswith("Reading it.")
    assert QGuiApplication.clipboard().text().startswith("Reading it.")


def test_append_to_10000_messages_is_fast(view):
    roles = ["user", "assistant", "tool"]
    big = [msg(i, roles[i % 3], ("word " * (5 + i % 40)).strip(), tool_call_id=f"c{i}")
           for i in range(10_000)]
    t = time.perf_counter()
    view.set_messages(big)
    QGuiApplication.processEvents()
    load = time.perf_counter() - t
    assert load < 3.0
    costs = []
    for i in range(10_000, 10_030):
        t = time.perf_counter()
        view.append_message(msg(i, "user", "a new message"))
        costs.append(time.perf_counter() - t)
    assert statistics.median(costs) < 0.005, costs
    t = time.perf_counter()
    QGuiApplication.processEvents()  # repaint after the appends
    assert time.perf_counter() - t < 0.25
    assert view.is_at_bottom() and view.visible_keys()[-1] == "m10029"
    # only rows that were painted were laid out, not ten thousand
    assert view.layouter().layouts_built < 500


def test_palette_switch_repaints(view):
    view.set_messages(conversation())
    view.set_palette(DARK)
    img = view.grab().toImage()
    # the background is the dark palette's
    assert img.pixelColor(img.width() - 2, img.height() - 2).lightness() < 60


def test_height_index_matches_a_plain_list():
    rng = random.Random(7)
    heights = [rng.randint(1, 300) for _ in range(257)]
    idx = HeightIndex(heights[:100])
    for h in heights[100:]:
        idx.append(h)
    for _ in range(200):
        r = rng.randrange(len(heights))
        heights[r] = rng.randint(1, 300)
        idx.set(r, heights[r])
    for i in range(len(heights) + 1):
        assert idx.prefix(i) == sum(heights[:i])
    for y in [0, 1, 150, 5_000, sum(heights) - 1, sum(heights) + 100]:
        row = idx.find(y)
        if y < sum(heights):
            assert sum(heights[:row]) <= y < sum(heights[: row + 1])
        else:
            assert row == len(heights) - 1
    assert HeightIndex().find(10) == 0


def test_real_trajectory_lists_every_tool_call(view, tmp_path):
    from engine.importer import import_transcript
    from engine.store.session import Session
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


def test_scrolling_up_through_unmeasured_rows_does_not_jump(view):
    rng = random.Random(3)
    words = ["alpha", "beta", "`code`", "**bold**", "a-much-longer-word", "x"]
    msgs = [msg(i, "assistant" if i % 2 else "user",
                "\n\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 120)))
                            for _ in range(rng.randint(1, 4))))
            for i in range(400)]
    view.set_messages(msgs)
    view.viewport().repaint()
    sb = view.verticalScrollBar()
    for _ in range(40):
        view.viewport().repaint()
        anchor = view.visible_keys()[1]
        y_before = view.row_rect(anchor).top()
        sb.setValue(sb.value() - 120)
        view.viewport().repaint()
        assert view.row_rect(anchor).top() == y_before + 120


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


def test_final_message_after_deltas_ends_the_stream(view):
    # the agent streams TextDelta(id) first and announces MessageAdded(id) with the final text
    view.set_messages([msg(1)])
    view.stream_delta("s1", "partial ans")
    view.flush()
    view.stream_delta("s1", "wer that will be dropped")
    final = {"id": "s1", "role": "assistant", "content": "the final answer", "ts": "2025-11-21T10:05:00+00:00"}
    assert view.append_message(final, 5) == "s1"
    view.flush()
    item = view.item("s1")
    assert not item.streaming
    assert item.msg["content"] == "the final answer"
    assert view.row_count() == 2
