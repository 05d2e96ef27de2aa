"""engine.model.compaction_change: a compaction's before → after on one basis, and whether it grows."""

from __future__ import annotations

from engine.model.compaction_change import PROMPT, REQUEST, compaction_change, event_change


def test_the_text_and_the_growth() -> None:
    grown = compaction_change(880, 1_149)
    assert grown.text() == "880 → 1,149 prompt tokens (+31%)" and grown.grows and grown.delta == 269
    assert "larger" in grown.warning() and grown.text(short=True) == "880 → 1,149 (+31%)"
    shrunk = compaction_change(167_731, 42_603)
    assert shrunk.text() == "167,731 → 42,603 prompt tokens (-75%)" and not shrunk.grows and shrunk.warning() == ""
    assert compaction_change(None, 5).text() == "—" and compaction_change(7, None).text() == "7 prompt tokens before"
    assert not compaction_change(7, None).grows and compaction_change(0, 3).ratio is None


def test_the_basis_of_a_record() -> None:
    assert event_change({"tokens_before": 9, "tokens_after": 3, "source_format": "claude-code"}).basis == PROMPT
    assert event_change({"tokens_before": 9, "tokens_after": 3, "tokens_basis": "prompt"}).basis == PROMPT
    old = event_change({"tokens_before": 1_904, "tokens_after": 2_173})  # ctxbench's own, before the basis was fixed
    assert old.basis == REQUEST and old.text() == "1,904 → 2,173 tokens incl. reserve (+14%)"
    assert event_change({"tokens_before": True, "tokens_after": "x"}).before is None
