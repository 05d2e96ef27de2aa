from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from engine.model.snapshot import ContextSnapshot
from widgets.compaction_preview import CompactionPreview
from widgets.theme import DARK


def snap(**kw) -> ContextSnapshot:
    data = dict(window=128_000, max_tokens=8_192, system=1_200, summary=0, history_user=12_000,
                history_assistant=20_000, history_tool=60_000, tools=900, threshold_tokens=102_400,
                estimator="heuristic", accuracy="calibrated")
    data.update(kw)
    return ContextSnapshot(**data)


MSGS = [{"id": f"p{i}", "role": ["user", "assistant", "tool"][i % 3], "content": f"message {i}"}
        for i in range(8)]
TOKENS = {m["id"]: 100 * (i + 1) for i, m in enumerate(MSGS)}


@pytest.fixture
def preview(qtbot):
    w = CompactionPreview()
    qtbot.addWidget(w)
    w.set_plan(snap(), snap(summary=900, history_user=1_000, history_assistant=2_000, history_tool=3_000),
               MSGS[:6], MSGS[6:], TOKENS, instruction="keep paths")
    w.open()
    qtbot.waitExposed(w)
    return w


def test_is_non_modal(preview, qtbot):
    assert not preview.isModal()
    assert preview.windowModality() == Qt.WindowModality.NonModal
    assert preview.isVisible()


def test_plan_lists_compacted_and_kept_with_tokens(preview):
    rows = preview.plan_rows()
    assert [r[0] for r in rows] == ["compacted"] * 6 + ["kept"] * 2
    assert [r[2] for r in rows] == [100, 200, 300, 400, 500, 600, 700, 800]
    assert rows[1][1] == "assistant"
    assert preview.plan_label.text() == "Plan: 6 messages compacted (2,100 tokens) · 2 kept (1,500 tokens)"
    assert preview.plan.topLevelItem(0).text(3) == "message 0"
    assert preview.instruction() == "keep paths"


def test_before_after_bars_and_headline(preview):
    labels = [label for label, _ in preview.bars.bars()]
    assert labels == ["Before", "After"]
    before, after = (s for _, s in preview.bars.bars())
    assert before.prompt == 94_100 and after.prompt == 9_000
    assert preview.headline.text().startswith("94,100 → 9,000 prompt tokens (-90%)")
    preview.set_after(None)
    assert "computing" in preview.headline.text()
    smaller = snap(summary=2_000, history_user=1_000, history_assistant=1_000, history_tool=1_000)
    preview.set_after(smaller)
    assert "→ 7,100" in preview.headline.text()
    img = preview.bars.grab().toImage()
    assert not img.isNull()
    preview.set_palette(DARK)
    assert preview.bars.grab().toImage().pixelColor(2, 2).lightness() < 60


def test_apply_needs_a_summary_and_emits_the_edited_text(preview, qtbot):
    assert not preview.apply_button.isEnabled()
    assert "summary is empty" in preview.apply_reason()
    edits = []
    preview.summary_edited.connect(edits.append)
    preview.set_summary("## Goal\nShip")
    assert preview.apply_button.isEnabled()
    assert edits == []  # set_summary is not a user edit
    preview.editor.setFocus()
    preview.editor.moveCursor(preview.editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(preview.editor, " it")
    qtbot.waitUntil(lambda: edits == ["## Goal\nShip it"], timeout=1000)
    with qtbot.waitSignal(preview.apply_requested) as blocker:
        qtbot.mouseClick(preview.apply_button, Qt.MouseButton.LeftButton)
    assert blocker.args == ["## Goal\nShip it"]
    assert not preview.isVisible()


def test_regenerate_with_instruction_and_busy_state(preview, qtbot):
    preview.instruction_edit.setText("  mention the failing test  ")
    with qtbot.waitSignal(preview.regenerate_requested) as blocker:
        qtbot.mouseClick(preview.regenerate_button, Qt.MouseButton.LeftButton)
    assert blocker.args == ["mention the failing test"]
    preview.set_busy(True)
    assert preview.progress.isVisible() and preview.cancel_button.isVisible()
    assert preview.progress.maximum() == 0  # indeterminate
    assert not preview.apply_button.isEnabled() and not preview.regenerate_button.isEnabled()
    assert preview.editor.isReadOnly()
    with qtbot.waitSignal(preview.cancel_requested):
        qtbot.mouseClick(preview.cancel_button, Qt.MouseButton.LeftButton)
    preview.set_busy(False)
    preview.set_error("The model did not answer: timeout")
    assert preview.error_text() == "The model did not answer: timeout"
    assert not preview.progress.isVisible()


def test_enter_in_the_instruction_field_regenerates_never_applies(preview, qtbot):
    preview.set_summary("## Goal\nx")
    applied = []
    preview.apply_requested.connect(applied.append)
    preview.instruction_edit.setFocus()
    with qtbot.waitSignal(preview.regenerate_requested):
        qtbot.keyClick(preview.instruction_edit, Qt.Key.Key_Return)
    assert applied == []
    assert preview.isVisible()


def test_discard_emits_once_and_cancels_a_running_call(preview, qtbot):
    discards, cancels = [], []
    preview.discard_requested.connect(lambda: discards.append(1))
    preview.cancel_requested.connect(lambda: cancels.append(1))
    preview.set_busy(True)
    qtbot.mouseClick(preview.discard_button, Qt.MouseButton.LeftButton)
    assert discards == [1] and cancels == [1]
    assert not preview.isVisible()
    preview.close()  # closing again does not discard twice
    assert discards == [1]


def test_escape_and_close_discard(qtbot):
    w = CompactionPreview()
    qtbot.addWidget(w)
    discards = []
    w.discard_requested.connect(lambda: discards.append(1))
    w.set_plan(snap(), None, MSGS[:2], MSGS[2:], TOKENS)
    w.open()
    qtbot.keyClick(w, Qt.Key.Key_Escape)
    assert discards == [1] and w.result() == QDialog.DialogCode.Rejected
    w.set_plan(snap(), None, MSGS[:2], MSGS[2:], TOKENS)  # a new plan can be discarded again
    w.show()
    w.close()
    assert discards == [1, 1]


def test_nothing_to_compact(qtbot):
    w = CompactionPreview()
    qtbot.addWidget(w)
    w.set_plan(snap(), snap(), [], MSGS, TOKENS)
    w.set_summary("## Goal\nx")
    assert not w.apply_button.isEnabled()
    assert w.apply_reason() == "Nothing to compact"


def test_digest_first_then_the_models_text_unless_edited(preview, qtbot):
    from engine.context.summaries import Summary

    digest = "## Goal\n1. ship it"
    part = Summary(digest, True, mode="both", model="openai/gpt-4o", digest=digest, digest_ms=3.0,
                   digest_tokens=12, model_pending=True)
    preview.set_summary(digest)
    preview.show_summary_parts(part)
    preview.set_busy(True, "openai/gpt-4o is writing…", apply_allowed=True)
    assert "digest + narrative by openai/gpt-4o" in preview.summary_label.text()
    assert preview.costs_text() == "digest 12 tokens in 3 ms · openai/gpt-4o: writing…"
    assert preview.apply_button.isEnabled() and not preview.editor.isReadOnly()
    assert preview.set_model_text(digest + "\n\n## Narrative\nwhy") and preview.summary().endswith("why")
    # the user edits; the model's (next) text then does not overwrite the edit
    preview.set_summary(digest)
    preview.editor.setFocus()
    preview.editor.moveCursor(preview.editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(preview.editor, " now")
    assert not preview.set_model_text("model text")
    assert preview.summary() == digest + " now" and "you edited" in preview.error_text()
    preview.set_busy(False)
    preview.show_summary_parts(Summary(digest, True, mode="digest", digest=digest, digest_tokens=12))
    assert "digest — no model" in preview.summary_label.text() and "writing" not in preview.costs_text()


def test_an_unusable_model_reply_is_shown_apart_and_the_digest_stays(preview, qtbot):
    """Issue 27, summary mode "model": the engine keeps the digest as the summary (engine.context.summaries.
    editor_summary); the editor keeps it, the warning says why, the model's reply is shown apart, read-only."""
    from engine.context.summaries import Summary

    digest = "## Goal\n1. ship it"
    preview.set_summary(digest)
    preview.show_summary_parts(Summary(digest, True, mode="model", model="m", digest=digest, model_pending=True))
    assert preview.model_reply.isHidden()
    done = Summary(digest, True, mode="model", model="m", digest=digest, model_text="just prose",
                   model_problem="the summary has no '##' section headings", model_ms=10.0)
    assert preview.set_model_text(done.text) and preview.summary() == digest
    preview.show_summary_parts(done)

    class _Plan:
        needed = True
        reason = ""

    preview.show_problem(_Plan(), done)
    assert preview.summary() == digest and "the digest stands" in preview.error_text()
    assert not preview.model_reply.isHidden() and preview.model_reply.isReadOnly()
    assert preview.model_reply.toPlainText() == "just prose" and "not used" in preview.model_reply_label.text()
    preview.show_summary_parts(Summary(digest, True, mode="digest", digest=digest))
    assert preview.model_reply.isHidden() and preview.model_reply.toPlainText() == ""


def test_a_compaction_that_grows_the_context_warns_and_apply_asks_to_confirm(preview, qtbot):
    """Issue 27: the preview's before → after is the prompt (no output reserve), the basis of the chat's marker
    and the Compactions tab (engine.model.compaction_change); a compaction that grows it is said, and Apply
    takes a second click."""
    from engine.model.compaction_change import event_change

    small = snap(history_user=100, history_assistant=200, history_tool=300, threshold_tokens=102_400)
    grown = snap(summary=900, history_user=100, history_assistant=0, history_tool=0)
    preview.set_plan(small, grown, MSGS[:6], MSGS[6:], TOKENS)
    preview.set_summary("## Goal\nlong")
    assert grown.prompt > small.prompt
    head = preview.headline.text()
    assert head.startswith(f"{small.prompt:,} → {grown.prompt:,} prompt tokens (+") and "grows" in head
    # the marker and the Compactions tab say the same of the event the engine records (prompt basis)
    event = {"tokens_before": small.prompt, "tokens_after": grown.prompt, "tokens_basis": "prompt"}
    assert event_change(event).text() in head.replace(" · ", "|").split("|")[0]
    assert preview.apply_button.isEnabled() and "larger" in preview.apply_reason()
    with qtbot.assertNotEmitted(preview.apply_requested):
        preview.apply_button.click()
    assert preview.apply_button.text() == "Apply anyway" and "larger" in preview.error_text()
    with qtbot.waitSignal(preview.apply_requested) as blocker:
        preview.apply_button.click()
    assert blocker.args == ["## Goal\nlong"]


def test_a_compaction_that_shrinks_applies_at_once(preview, qtbot):
    preview.set_summary("## Goal\nshort")
    assert "grows" not in preview.headline.text() and preview.apply_button.text() == "Apply"
    with qtbot.waitSignal(preview.apply_requested):
        preview.apply_button.click()
