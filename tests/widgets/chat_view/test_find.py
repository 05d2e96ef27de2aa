"""Find in the conversation (widgets/chat_view/find.py): counts, steps, highlights, scrolling."""

from __future__ import annotations

import json

from PySide6.QtGui import QColor

from tests.widgets.chat_view.rows import msg
from widgets.chat_view.find import HIT_CURRENT, HIT_LIGHT, ChatFinder, occurrences


def test_occurrences_do_not_overlap():
    assert occurrences("aaaa", "aa") == [0, 2]
    assert occurrences("abc", "") == []


def test_counts_and_steps_across_messages(view):
    rows = [msg(i, "user" if i % 2 else "assistant", f"row {i} Needle" + (" needle" if i % 3 == 0 else ""))
            for i in range(30)]
    view.set_messages(rows)
    current, total = view.find_text("NEEDLE")
    assert total == 30 + 10 and current == 0
    assert view.current_hit() == ("m0", 0)
    view.find_step()
    assert view.current_hit() == ("m0", 1)
    view.find_step()
    assert view.current_hit() == ("m1", 0)
    assert view.find_step(forward=False) == (1, 40)
    view.find_step(forward=False)
    view.find_step(forward=False)
    assert view.find_state() == (39, 40) and view.current_hit() == ("m29", 0)
    assert view.find_text("absent") == (-1, 0)


def test_next_scrolls_the_hit_into_view_and_paints_it(view, qtbot):
    rows = [msg(i, "user", f"filler text {i} " * 20) for i in range(200)]
    rows[40] = msg(40, "user", "the zebra is here")
    rows[150] = msg(150, "assistant", "another zebra there")
    view.set_messages(rows)
    view.find_text("zebra")
    view.flush()
    assert "m40" in view.visible_keys()
    view.find_step()
    view.flush()
    assert "m150" in view.visible_keys()
    img = view.viewport().grab().toImage()
    rect = view.row_rect("m150")
    colors = {img.pixelColor(x, y).name() for x in range(0, img.width(), 2)
              for y in range(max(0, int(rect.top())), min(img.height(), int(rect.bottom())), 2)}
    assert QColor(HIT_CURRENT).name() in colors
    view.find_step()  # back to the first: lightly painted now
    view.find_step()
    view.flush()
    assert view.current_hit() == ("m150", 0)


def test_hit_in_a_collapsed_tool_result_expands_it(view):
    call = {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": json.dumps({"p": "a"})}}
    lines = "\n".join(f"line {i}" for i in range(50)) + "\nthe secret word"
    view.set_messages([msg(1, "assistant", "", tool_calls=[call]), msg(2, "tool", lines, tool_call_id="c1")])
    assert not view.item("m2").expanded
    assert view.find_text("SECRET") == (0, 1)
    assert view.item("m2").expanded


def test_search_of_10000_messages_is_plain_text(view):
    view.set_messages([msg(i, "user", f"message {i} with some words") for i in range(10_000)])
    built = view.layouter().layouts_built
    finder = ChatFinder(view.chat_model())
    assert finder.search("WORDS") == 10_000
    assert finder.search("message 9999 ") == 1
    assert view.layouter().layouts_built == built  # no row was laid out to search
    assert HIT_LIGHT
