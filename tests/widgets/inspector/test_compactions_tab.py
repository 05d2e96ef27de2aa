"""The "Compactions" tab (widgets/inspector/compactions_tab.py)."""

from __future__ import annotations


def test_compaction_log(ins):
    events = [
        {"trigger": "auto", "tokens_before": 70_000, "tokens_after": 15_000, "messages_compacted": 40,
         "messages_kept": 6, "duration_ms": 2300, "result": "summarized", "summary": "## Goal\nx",
         "archive_day": "2025-11-21", "ts": "2025-11-21T10:00:29+00:00"},
        {"trigger": "reactive", "tokens_before": 130_000, "tokens_after": 130_000, "messages_compacted": 0,
         "messages_kept": 30, "duration_ms": 100, "result": "failed", "reason": "summary lacked headings"},
    ]
    ins.set_compaction_events(events)
    t = ins.log_table
    assert t.rowCount() == 2
    assert t.item(0, 3).text() == "70,000 → 15,000"
    assert t.item(0, 4).text() == "40 / 6"
    assert t.item(0, 5).text() == "2.3 s"
    assert t.item(1, 2).text() == "failed"
    t.setCurrentCell(1, 0)
    assert "Reason: summary lacked headings" in ins.log.detail.toPlainText()
    t.setCurrentCell(0, 0)
    assert "dialog/2025-11-21.jsonl" in ins.log.detail.toPlainText()
    ins.add_compaction_event({"trigger": "manual", "result": "undone"})
    assert t.rowCount() == 3
