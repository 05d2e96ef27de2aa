"""The "Compactions" tab (widgets/inspector/compactions_tab.py)."""

from __future__ import annotations

from engine.model.records import CompactionRecord


def rec(fields: dict) -> CompactionRecord:
    return CompactionRecord.from_json(fields)


def test_compaction_log(ins):
    events = [
        {"trigger": "auto", "tokens_before": 70_000, "tokens_after": 15_000, "messages_compacted": 40,
         "messages_kept": 6, "duration_ms": 2300, "result": "summarized", "summary": "## Goal\nx",
         "archive_day": "2025-11-21", "ts": "2025-11-21T10:00:29+00:00"},
        {"trigger": "reactive", "tokens_before": 130_000, "tokens_after": 130_000, "messages_compacted": 0,
         "messages_kept": 30, "duration_ms": 100, "result": "failed", "reason": "summary lacked headings"},
    ]
    ins.set_compaction_events([rec(e) for e in events])
    t = ins.log_table
    assert t.rowCount() == 2
    # a record of ctxbench's own without a basis is of the older request basis: said, never mixed with a prompt
    assert t.item(0, 3).text() == "70,000 → 15,000 (-79%)"
    assert "70,000 → 15,000 tokens incl. reserve (-79%)" in t.item(0, 3).toolTip()
    assert t.item(0, 4).text() == "40 / 6"
    assert t.item(0, 5).text() == "2.3 s"
    assert t.item(1, 2).text() == "failed"
    t.setCurrentCell(1, 0)
    assert "Reason: summary lacked headings" in ins.log.detail.toPlainText()
    t.setCurrentCell(0, 0)
    assert "dialog/2025-11-21.jsonl" in ins.log.detail.toPlainText()
    ins.add_compaction_event(rec({"trigger": "manual", "result": "undone"}))
    assert t.rowCount() == 3


def test_another_agents_compaction_shows_what_compacting_cost(ins, qtbot):
    ev = {"id": "c1", "trigger": "auto", "tokens_before": 167_731, "tokens_after": 42_603, "messages_compacted": 160,
          "messages_kept": 0, "duration_ms": 0.0, "result": "summarized", "summary": "line one\n\nline two",
          "archive_day": "2026-02-11", "ts": "2026-02-11T22:31:35.739+00:00", "source_format": "claude-code",
          # Claude Code 2.1.39: the file holds only the placeholder "6" of the summary's output (the reader says so)
          "cost": {"prompt_tokens": 169_910, "completion_tokens": None, "completion_placeholder": 6,
                   "cache_read_tokens": 167_093, "cache_write_tokens": 2_814, "model": "claude-opus-4-6"}}
    own = {"id": "c2", "trigger": "manual", "tokens_before": 9_000, "tokens_after": 2_000, "messages_compacted": 8,
           "messages_kept": 2, "duration_ms": 1200, "result": "summarized", "summary": "s"}
    ev, own = rec(ev), rec(own)
    ins.set_compaction_events([ev, own])
    log = ins.log
    assert log.table.item(0, 5).text() == "—" and log.table.item(1, 5).text() == "1.2 s"  # an import has no duration
    assert "169,910 prompt tokens" in log.table.item(0, 1).toolTip()
    assert not log.archive_button.isEnabled()
    ins.show_compaction(ev)
    assert ins.currentWidget() is log
    text = log.detail.toPlainText()
    assert ("Compacting cost: 169,910 prompt tokens (167,093 cache read, 2,814 cache write), completion unknown "
            "(the file holds only a streaming placeholder, 6) · claude-opus-4-6") in text
    assert "6 completion" not in text  # never a figure the file does not hold
    assert "167,731 → 42,603 prompt tokens (-75%)" in text and "by claude-code" in text
    assert "line one\n\nline two" in text
    # no cost-state: the call at litellm's prices, without its output, flagged as a lower bound
    cell = log.table.item(0, 6).text()
    assert cell.startswith("$") and cell.endswith("+")
    ins.set_archive_days(["2026-02-11"])
    with qtbot.waitSignal(ins.archive_day_requested) as asked:
        log.archive_button.click()
    assert asked.args == ["2026-02-11"] and ins.currentWidget() is ins.archive
    ins.show_compaction(own)
    text = log.detail.toPlainText()
    assert "Compacting cost" not in text and "1.2 s" in text and not log.archive_button.isEnabled()


CLAUDE_2_1_LINE = {"id": "c3", "trigger": "manual", "tokens_before": 12_326, "tokens_after": 12_666,
              "messages_compacted": 14, "messages_kept": 1, "duration_ms": 0.0, "result": "summarized",
              "summary": "s", "source_format": "claude-code", "post_tokens": 2_649, "cost_usd": 0.012094,
              "placed_by": "chain", "cost": None}
CLAUDE_2_1 = rec(CLAUDE_2_1_LINE)


def test_a_claude_code_2_1_compaction_the_agents_own_figures(ins):
    from widgets.compaction_text import compaction_tooltip, head_lines

    placed = rec({**CLAUDE_2_1_LINE, "id": "c4", "placed_by": "file order", "cost_usd": None, "post_tokens": None})
    ins.set_compaction_events([CLAUDE_2_1, placed])
    log = ins.log
    assert log.table.item(0, 4).text() == "14 / 1" and log.table.item(0, 6).text() == "$0.0121"
    assert log.table.item(1, 6).text() == ""
    tip = log.table.item(0, 3).toolTip()
    assert "Right after compacting: 2,649 tokens (the agent's own count)" in tip and "$0.0121" in tip
    assert "Placed by file order" in log.table.item(1, 0).toolTip()
    lines = head_lines(CLAUDE_2_1)
    assert "12,326 → 12,666 prompt tokens (+3%) (the first call after)" in lines
    assert "⚠ The context grew: the summary is longer than what it replaced" in lines  # engine: grows
    assert "Right after compacting: 2,649 tokens (the agent's own count)" in lines
    assert "14 messages compacted · 1 kept" in lines
    assert "Compacting cost $0.0121 (the agent's cost records)" in lines
    assert not any("file order" in line for line in lines)
    assert "Placed by file order (its link to the message before it is missing in the file)" in head_lines(placed)
    assert not any("agent's own count" in line or "$" in line for line in head_lines(placed))
    assert "(the first call after)" not in compaction_tooltip(placed)  # no count of its own to set it beside
    ins.show_compaction(CLAUDE_2_1)
    assert "the agent's own count" in log.detail.toPlainText()


def test_a_claude_code_2_1_332_compaction_the_tokens_it_dropped(ins):
    from widgets.compaction_text import compaction_details, compaction_tooltip

    dropped = rec({**CLAUDE_2_1_LINE, "id": "c5", "dropped_tokens": 10_415})
    ins.set_compaction_events([dropped, CLAUDE_2_1])
    line = "Dropped: 10,415 tokens (the agent's count)"
    assert line in ins.log.table.item(0, 3).toolTip() and line in compaction_tooltip(dropped)
    assert line in compaction_details(dropped)
    assert "Dropped:" not in ins.log.table.item(1, 3).toolTip() and "Dropped:" not in compaction_tooltip(CLAUDE_2_1)
