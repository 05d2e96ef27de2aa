"""The "Summary" tab (widgets/inspector/summary_tab.py)."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication


def test_summary_tab_renders_markdown_safely(ins):
    ins.set_summary("## Goal\nShip **it**\n\n![x](file:///etc/hostname)", 321)
    doc = ins.summary.document()
    assert "Goal" in doc.toPlainText() and "**" not in doc.toPlainText()
    assert ins.summary.label.text() == "Current summary · 321 tokens"
    ins.summary_view.grab()  # painting lays out the image: it must be refused
    assert any("etc/hostname" in u for u in doc.refused)
    ins.summary.copy_button.click()
    assert QApplication.clipboard().text().startswith("## Goal")
    ins.set_summary("")
    assert "No summary yet" in ins.summary.label.text() and not ins.summary.copy_button.isEnabled()
