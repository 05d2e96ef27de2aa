"""Issue 27 in the chat view: find over tool arguments and links, terminal escapes not shown raw, the
Copy link of a tool result beside its label (not over its text), injected context as compact rows,
Select All over the conversation."""

from __future__ import annotations

import json

from tests.widgets.chat_view.rows import doc_texts, hotspot, msg, texts
from widgets.chat_view.find import HIT_CURRENT
from widgets.chat_view.layout import injected_kind, is_attachment
from widgets.chat_view.model import strip_ansi


def _call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def test_find_searches_tool_arguments_names_and_links(view):
    call = _call("c1", "Bash", {"command": "pytest -k needle_in_args"})
    view.set_messages([
        msg(1, "assistant", "Running the tests.", tool_calls=[call]),
        msg(2, "tool", "3 passed", tool_call_id="c1",
            offload={"path": "tool_results/abc.txt", "bytes": 10, "lines": 1},
            subagent={"id": "agent-7", "session": "subagents/agent-7", "model": "haiku"}),
    ])
    assert view.find_text("needle_in_args")[1] == 2  # in the assistant's call line and in the tool's arguments
    assert view.current_hit() == ("m1", 0)
    view.find_step()
    assert view.current_hit() == ("m2", 0) and view.item("m2").expanded  # shown where it is painted
    assert view.find_text("bash")[1] == 2  # the tool's name, in the call and in the block
    assert view.find_text("tool_results/abc.txt")[1] == 1  # the "Open full output" link's file
    assert view.find_text("agent-7")[1] == 1  # the subagent link
    assert view.find_text("absent")[1] == 0


def test_a_hit_in_the_arguments_of_an_expanded_tool_block_is_painted(view):
    call = _call("c1", "grep", {"pattern": "zebra"})
    view.set_messages([msg(1, "assistant", "", tool_calls=[call]), msg(2, "tool", "no match", tool_call_id="c1")])
    view.find_text("zebra")
    view.find_step()  # the second hit: the tool block's arguments
    assert view.current_hit() == ("m2", 0)
    view.flush()
    img = view.viewport().grab().toImage()
    rect = view.row_rect("m2")
    colors = {img.pixelColor(x, y).name() for x in range(0, img.width(), 2)
              for y in range(max(0, int(rect.top())), min(img.height(), int(rect.bottom())), 2)}
    assert HIT_CURRENT.lower() in colors


def test_terminal_escapes_are_not_shown():
    assert strip_ansi("\x1b[31mred\x1b[0m and \x1b[1;32mgreen\x1b[m\x1b]0;title\x07!") == "red and green!"
    assert strip_ansi("plain [0m text") == "plain [0m text"  # no escape character: left alone


def test_a_tool_result_with_colours_reads_as_text(view):
    call = _call("c1", "Bash", {"command": "ls --color"})
    view.set_messages([msg(1, "assistant", "", tool_calls=[call]),
                       msg(2, "tool", "\x1b[01;34msrc\x1b[0m\n\x1b[01;32mrun.sh\x1b[0m", tool_call_id="c1")])
    view.set_tool_expanded("m2", True)
    shown = "\n".join(doc_texts(view, "m2") + texts(view, "m2"))
    assert "src\nrun.sh" in shown and "\x1b" not in shown and "[0m" not in shown
    assert view.find_text("src run")[1] == 0 and view.find_text("run.sh")[1] == 1
    view.copy_item("m2")


def test_the_copy_link_of_a_tool_result_is_beside_its_label_not_over_its_text(view):
    call = _call("c1", "cat", {"path": "a.txt"})
    long_line = "x" * 400
    view.set_messages([msg(1, "assistant", "", tool_calls=[call]), msg(2, "tool", long_line, tool_call_id="c1")])
    view.set_tool_expanded("m2", True)
    item = view.item("m2")
    lay = view.layouter().layout(item, view.row_width())
    result_origin, result_doc = lay.docs[-1]
    text_top = result_origin.y()
    copies = [rect for rect, action, _ in view.hotspots("m2") if action == "copycode"]
    assert len(copies) == 2  # the arguments' and the result's
    assert all(rect.bottom() <= text_top or rect.top() >= text_top + result_doc.size().height() for rect in copies)
    label = next(op.a for op in lay.ops if op.kind == "text" and op.b == "Result (as sent in the context)")
    assert any(abs(rect.center().y() - label.center().y()) < 4 for rect in copies)  # on the label's line


def test_injected_context_is_a_compact_row(view):
    reminder = "<system-reminder>\nThe user opened src/app.py in the IDE.\n</system-reminder>"
    task = "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>"
    view.set_messages([msg(1, "user", reminder), msg(2, "user", task),
                       msg(3, "user", "Please fix the bug <system-reminder>x</system-reminder>")])
    assert injected_kind(view.item("m1").msg) == "system reminder" and is_attachment(view.item("m1"))
    assert injected_kind(view.item("m2").msg) == "task notification" and is_attachment(view.item("m2"))
    assert not is_attachment(view.item("m3"))  # a person's words with a reminder: a user message
    line = texts(view, "m1")[0]
    assert line.startswith("▸ ◇ system reminder")
    assert doc_texts(view, "m1") == []  # collapsed: one line
    compact = view.row_rect("m1").height()
    view.click("m1", hotspot(view, "m1", "toggle"))
    assert any("The user opened src/app.py" in t for t in doc_texts(view, "m1"))
    assert view.row_rect("m1").height() > compact
    assert view.row_rect("m3").height() > compact


def test_select_all_selects_the_conversation_and_copy_copies_it(view):
    view.set_messages([msg(1, "user", "first words"), msg(2, "assistant", "last words")])
    assert view.select_current()  # nothing clicked: everything
    text = view.selected_text()
    assert text.startswith("first words") and text.endswith("last words")
    assert view.copy_current() == text
