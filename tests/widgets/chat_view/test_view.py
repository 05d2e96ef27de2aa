"""The view (widgets/chat_view/view.py): streaming, scrolling, markers, clicks, copy, palette."""

from __future__ import annotations

import random
import statistics
import time

import numpy as np
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QGuiApplication, QImage

from engine.model.records import CompactionRecord
from tests.widgets.chat_view.rows import conversation, doc_texts, hotspot, msg, texts
from widgets.chat_view import ChatView
from widgets.theme import DARK


def test_mouse_click_on_a_link_hotspot(view, qtbot):
    view.set_messages(conversation())
    view.scroll_to_message("m3")
    rect = view.row_rect("m3")
    local = hotspot(view, "m3", "offload")
    with qtbot.waitSignal(view.open_offload):
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                         pos=QPointF(local.x(), rect.top() + local.y()).toPoint())

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
    key = view.add_compaction_marker(CompactionRecord.from_json(ev), undoable=True, after_message_id="m2")
    assert key == "cmp1"
    assert [it.key for it in view.chat_model().items()][2] == "cmp1"
    line = " ".join(texts(view, "cmp1"))
    assert "manual" in line and "42,000 → 9,000 tokens incl. reserve (-79%)" in line  # an older record
    assert "32 messages compacted, 4 kept" in line
    with qtbot.waitSignal(view.summary_requested) as blocker:
        view.click("cmp1", hotspot(view, "cmp1", "summary"))
    assert blocker.args[0].summary == "## Goal\nship"
    with qtbot.waitSignal(view.undo_requested) as blocker:
        view.click("cmp1", hotspot(view, "cmp1", "undo"))
    assert blocker.args == ["cmp1"]
    changes: list[int] = []
    view.chat_model().dataChanged.connect(lambda a, b: changes.append(a.row()))
    view.update_compaction_marker("cmp1", undoable=True)  # as drawn (the window says it with each state)
    assert changes == []
    view.update_compaction_marker("cmp1", undoable=False)
    assert changes == [2] and [a for _, a, _ in view.hotspots("cmp1")] == ["summary"]
    view.update_compaction_marker("cmp1", undoable=True)
    assert [a for _, a, _ in view.hotspots("cmp1")] == ["summary", "undo"]
    view.update_compaction_marker("cmp1", CompactionRecord.from_json({**ev, "result": "undone"}), undoable=False)
    assert [a for _, a, _ in view.hotspots("cmp1")] == ["summary"]
    assert view.remove_compaction_marker("cmp1")
    assert view.marker_ids() == []

def test_markers_are_placed_by_time_when_loading(view):
    msgs = [msg(i) for i in range(1, 6)]
    marker = {"id": "k", "trigger": "auto", "tokens_before": 5, "tokens_after": 2, "ts": msgs[2]["ts"] + "x",
              "result": "summarized"}
    view.set_messages(msgs, markers=[CompactionRecord.from_json(marker)])
    assert [it.key for it in view.chat_model().items()] == ["m1", "m2", "m3", "k", "m4", "m5"]
    failed = {"id": "f", "trigger": "reactive", "result": "failed", "reason": "summary lacked headings"}
    view.add_compaction_marker(CompactionRecord.from_json(failed), undoable=True)
    assert "summary lacked headings" in texts(view, "f")
    assert "undo" not in [a for _, a, _ in view.hotspots("f")]  # a failed compaction changed nothing

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

def test_out_of_context_told_once_per_run_of_rows(view):
    """Thousands of messages taken out of the context at once (a session loaded after compactions) reach the view
    as one notice per run of adjacent rows, each flagged; the ones put back are told too."""
    view.set_messages([msg(i) for i in range(1, 2001)])
    notices = []
    view.chat_model().dataChanged.connect(lambda top, bottom, *_: notices.append((top.row(), bottom.row())))
    view.set_out_of_context([f"m{i}" for i in range(1, 1501)] + ["m1800", "m1801"])
    assert notices == [(0, 1499), (1799, 1800)]
    assert view.item("m1").out_of_context and view.item("m1801").out_of_context
    assert not view.item("m1501").out_of_context
    notices.clear()
    view.set_out_of_context([f"m{i}" for i in range(1, 1501)])  # two put back
    assert notices == [(1799, 1800)] and not view.item("m1800").out_of_context
    notices.clear()
    view.set_in_context({f"m{i}" for i in range(1401, 2001)})  # the live ones: every other message out
    assert notices == [(1400, 1499)] and not view.item("m1401").out_of_context
    assert view.item("m1400").out_of_context and not view.item("m2000").out_of_context
    notices.clear()
    view.set_in_context({f"m{i}" for i in range(1401, 2001)})  # as drawn: nothing told
    assert notices == []

def test_in_context_flags_follow_every_change_of_rows_and_live_ids(view):
    """The flags ``set_in_context`` leaves (found by set operations on the keys) are those of a pass over every row:
    after loads with and without ``live``, appends, removals, markers, set_out_of_context and repeated states; and
    ``marker_ids`` (the model's marker keys in row order) are the markers of such a pass."""
    rng = random.Random(28)

    def check(live):
        for it in view.chat_model().items():
            assert it.out_of_context == (it.kind == "message" and it.key not in live), it.key
        assert view.marker_ids() == [it.key for it in view.chat_model().items() if it.kind == "marker"]

    view.set_messages([msg(i) for i in range(300)], live={f"m{i}" for i in range(200, 300)})
    live = {f"m{i}" for i in range(150, 300)}
    view.set_in_context(live)
    check(live)
    n = 300
    for step in range(60):
        op = rng.randrange(5)
        if op == 0:
            for _ in range(rng.randrange(1, 6)):
                view.append_message(msg(n))
                if rng.random() < 0.7:
                    live.add(f"m{n}")
                n += 1
        elif op == 1:
            view.remove_message(f"m{n - 1}")
            live.discard(f"m{n - 1}")
        elif op == 2:
            if view.marker_ids() and rng.random() < 0.3:
                view.remove_compaction_marker(rng.choice(view.marker_ids()))
            else:
                after = f"m{rng.randrange(n)}" if rng.random() < 0.5 else None
                view.add_compaction_marker(CompactionRecord.from_json(
                    {"result": "summarized", "trigger": "auto", "ts": "2025-11-21T11:00:00+00:00", "id": f"c{step}"}),
                    False, after if after is not None and view.item(after) is not None else None)
        elif op == 3:
            view.set_out_of_context([f"m{i}" for i in rng.sample(range(n), 20)])
        else:
            live = {f"m{i}" for i in range(rng.randrange(n), n)}
        view.set_in_context(live)
        check(live)
        view.set_in_context(frozenset(live))  # told again: nothing flips
        check(live)
    assert len(view.marker_ids()) >= 3  # (markers were placed among the rows, some taken out again)
    notices = []
    view.chat_model().dataChanged.connect(lambda top, bottom, *_: notices.append((top.row(), bottom.row())))
    view.set_in_context(list(live))
    assert notices == []


def test_an_unchanged_context_state_over_20000_rows_is_cheap(view):
    """While a session is followed the window says which messages are in the context a few times a second: with
    20,000 rows, 1,000 of them in the context and nothing to flip, a few hundredths of a millisecond (a pass over
    every row in Python: ~1 ms)."""
    view.set_messages([msg(i) for i in range(20_000)], live={f"m{i}" for i in range(19_000, 20_000)})
    live = {f"m{i}" for i in range(19_000, 20_000)}
    view.set_in_context(live)
    times = []
    for _ in range(30):
        t = time.perf_counter()
        view.set_in_context(live)
        times.append(time.perf_counter() - t)
    assert statistics.median(times) < 0.0003, times
    assert view.item("m18999").out_of_context and not view.item("m19000").out_of_context


def test_copy_item(view):
    view.set_messages(conversation())
    assert view.copy_item("m2").startswith("Reading it.")
    assert QGuiApplication.clipboard().text().startswith("Reading it.")

def test_append_to_10000_messages_is_fast(view):
    # the load and repaint times are benchmarked (benchmarks/gui_bench.py: chat append with layout and
    # paint); here: the median append cost over 30 appends, and that only painted rows are laid out
    roles = ["user", "assistant", "tool"]
    big = [msg(i, roles[i % 3], ("word " * (5 + i % 40)).strip(), tool_call_id=f"c{i}")
           for i in range(10_000)]
    view.set_messages(big)
    QGuiApplication.processEvents()
    costs = []
    for i in range(10_000, 10_030):
        t = time.perf_counter()
        view.append_message(msg(i, "user", "a new message"))
        costs.append(time.perf_counter() - t)
    assert statistics.median(costs) < 0.005, costs
    QGuiApplication.processEvents()  # repaint after the appends
    assert view.is_at_bottom() and view.visible_keys()[-1] == "m10029"
    # only rows that were painted were laid out, not ten thousand
    assert view.layouter().layouts_built < 500


def test_palette_switch_repaints(view):
    view.set_messages(conversation())
    view.set_palette(DARK)
    img = view.grab().toImage()
    # the background is the dark palette's
    assert img.pixelColor(img.width() - 2, img.height() - 2).lightness() < 60

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


def _pixels(img: QImage) -> np.ndarray:
    img = img.convertToFormat(QImage.Format.Format_RGB32)
    return np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine()).astype(int)


def _largest_difference(view: ChatView, qtbot) -> int:
    """The largest colour difference between the pixels Qt kept and a fresh paint of the view."""
    kept, fresh = _kept_and_fresh(view, qtbot)
    assert kept.size() == fresh.size()
    return int(np.abs(_pixels(kept) - _pixels(fresh)).max())


def _kept_and_fresh(view: ChatView, qtbot) -> tuple[QImage, QImage]:
    """The pixels Qt kept for the window (the offscreen backing store), once every pending paint is
    done, and a fresh paint of it."""
    qtbot.waitUntil(lambda: not view._resize_timer.isActive(), timeout=1000)
    for _ in range(3):  # a paint may post another (rows measured exactly while painting moved)
        QGuiApplication.processEvents()
    return QGuiApplication.primaryScreen().grabWindow(view.winId()).toImage(), view.grab().toImage()


def test_partial_repaints_leave_the_same_pixels_as_a_full_paint(view, qtbot):
    # appends and streamed deltas move the kept pixels (scroll) and repaint only what changed: the
    # result must be what a paint of the whole view shows
    view.set_messages([msg(i, "user", f"message {i} " + "word " * (i * 7 % 50)) for i in range(50)])
    QGuiApplication.processEvents()
    paints = view.paints
    for i in range(50, 60):
        view.append_message(msg(i, "assistant", f"answer {i} with **markdown**\n\n- a\n- b"))
        view.scroll_to_bottom()
        QGuiApplication.processEvents()
    for k in range(20):
        view.stream_delta("s", f"streamed **{k}** words\n\n" if k % 3 == 0 else "more words ")
        view.scroll_to_bottom()
        QGuiApplication.processEvents()
    assert view.paints - paints >= 30
    # equal but for antialiasing noise (a rounded corner cut by the edge of a repainted strip): a row
    # painted in the wrong place differs by far more
    assert _largest_difference(view, qtbot) <= 8
    # the comparison reads the kept pixels: a change made behind the view's back shows
    view.item("s").msg = {**view.item("s").msg, "content": "changed without telling the view"}
    view.item("s").touch()
    assert _largest_difference(view, qtbot) > 100


def test_an_attachment_is_one_muted_row_its_text_on_a_click(view, qtbot):
    from widgets.chat_view.layout import attachment_title

    skills = "<system-reminder>\n" + "\n".join(f"- skill-{i}" for i in range(30)) + "\n</system-reminder>"
    msgs = [msg(1, "user", "Run the tests"),
            msg(2, "user", skills, attachment="skill_listing", sent_as="system"),
            msg(3, "assistant", "All pass.", preserved=True)]
    view.set_messages(msgs, {"m2": 1_620, "m3": 4})
    view.flush()
    person, injected = view.row_rect("m1"), view.row_rect("m2")
    assert injected.height() < person.height() / 1.5  # compact: one line, no "You" bubble
    line = texts(view, "m2")
    assert line[0] == "▸ ◇ skill listing · 1,620 tokens · injected as system" == attachment_title(msgs[1], 1_620)
    assert "You" not in line and doc_texts(view, "m2") == []
    view.click("m2", hotspot(view, "m2", "toggle"))
    assert view.item("m2").expanded and texts(view, "m2")[0].startswith("▾ ◇ skill listing")
    assert doc_texts(view, "m2") == [skills]
    assert view.row_rect("m2").height() > person.height()
    view.set_tool_expanded("m2", False)
    assert view.find_text("skill-29") == (0, 1)  # found in the collapsed row: it opens
    assert view.item("m2").expanded
    assert "kept across the compaction" in " ".join(texts(view, "m3"))
    assert "kept across the compaction" not in " ".join(texts(view, "m1"))


def test_an_imported_compaction_marker_says_the_agents_own_figures(view):
    view.set_messages([msg(1), msg(2, "assistant")])
    ev = {"id": "cc", "trigger": "manual", "tokens_before": 12_326, "tokens_after": 12_666, "messages_compacted": 14,
          "messages_kept": 1, "duration_ms": 0.0, "result": "summarized", "summary": "s", "post_tokens": 2_649,
          "cost_usd": 0.012094, "placed_by": "file order", "source_format": "claude-code"}
    view.add_compaction_marker(CompactionRecord.from_json(ev), undoable=False, after_message_id="m1")
    line = texts(view, "cc")
    # no duration of its own; the prompt basis of every view, and the growth said
    assert line[1] == "12,326 → 12,666 prompt tokens (+3%) ⚠ · 14 messages compacted, 1 kept"
    assert line[2] == "2,649 right after (the agent's count) · cost $0.0121 · placed by file order"
    view.update_compaction_marker("cc", CompactionRecord.from_json(
        {k: v for k, v in ev.items() if k not in ("post_tokens", "cost_usd", "placed_by", "source_format")}))
    assert texts(view, "cc")[1].endswith("1 kept · 0.0 s") and len(texts(view, "cc")) == 3  # title, line, link


def test_markers_placed_on_loading_land_where_one_insertion_each_puts_them(view, qtbot):
    """set_messages(placed=…) — a session's markers in one reset of the model — gives the rows, events and undo
    flags that add_compaction_marker one marker after the other gives (two after one message: the later first; an
    unknown or no message: at the end; a marker given twice: the first updated in place)."""
    messages = [msg(i, "user" if i % 2 else "assistant") for i in range(1, 9)]
    raw = {i: {"id": f"c{i}", "trigger": "auto", "tokens_before": 100 * i, "tokens_after": 10 * i,
               "result": "summarized"} for i in range(7)}
    ev = {i: CompactionRecord.from_json(r) for i, r in raw.items()}
    placed = [(ev[0], False, "m2"), (ev[1], True, "m2"), (ev[2], False, "m7"), (ev[3], False, None),
              (ev[4], True, "gone"), (ev[5], False, "c2"),
              (CompactionRecord.from_json({**raw[0], "tokens_after": 3}), True, "m5"),
              (CompactionRecord.from_json({"trigger": "manual", "tokens_before": 9, "tokens_after": 1,
                                          "result": "summarized"}), False, "m1")]
    one_by_one = ChatView(pal=DARK)
    qtbot.addWidget(one_by_one)
    one_by_one.set_messages(messages)
    for event, undoable, after in placed:
        one_by_one.add_compaction_marker(event, undoable, after)
    view.set_messages(messages, placed=placed)

    def rows(v: ChatView) -> list[tuple[str, CompactionRecord | None, bool]]:
        return [(it.key if not it.key.startswith("compaction-") else "generated", it.event, it.undoable)
                for it in v.chat_model().items()]

    assert rows(view) == rows(one_by_one)
    assert [k for k, _, _ in rows(view)][:5] == ["m1", "generated", "m2", "c1", "c0"]
    assert view.item("c0").event.tokens_after == 3 and view.item("c0").undoable
    assert view.message_ids() == one_by_one.message_ids()


def test_messages_out_of_the_context_flagged_on_loading_as_after_it(view, qtbot):
    """set_messages(live=…) flags the messages not in the context as set_out_of_context after the load does (the
    window then finds nothing to flip: no row measured again)."""
    messages = [msg(i, "user" if i % 2 else "assistant") for i in range(1, 40)]
    live = {f"m{i}" for i in range(25, 40)}
    after = ChatView(pal=DARK)
    qtbot.addWidget(after)
    after.set_messages(messages)
    after.set_out_of_context([k for k in after.message_ids() if k not in live])
    view.set_messages(messages, live=live)
    flags = [(it.key, it.out_of_context) for it in view.chat_model().items()]
    assert flags == [(it.key, it.out_of_context) for it in after.chat_model().items()]
    assert sum(out for _, out in flags) == 24
    told: list[int] = []
    view.chat_model().dataChanged.connect(lambda top, _bottom, *_: told.append(top.row()))
    view.set_out_of_context([k for k in view.message_ids() if k not in live])
    assert told == []
