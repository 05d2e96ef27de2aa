"""engine.context.summaries: the summary modes (digest | model | both, auto by model), the setting, the
Compactor's use of them (automatic, proactive, manual preview in two steps), incremental compaction
and undo."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine.context.compaction import Compactor
from engine.context.conversation import Session
from engine.context.digest_text import parse_digest
from engine.context.summaries import NARRATIVE_HEADING, Summary, resolve_mode
from engine.context.summary_call import SECTIONS, check_summary
from engine.model.messages import Message, assistant, tool_call, tool_result, user
from engine.model.snapshot import WindowInfo
from engine.store import archive
from engine.store.config import LOCAL_MODEL, Settings, load_settings

NARRATIVE = "We kept the public API and fixed the parser first; the suite runs next."


class FakeLLM:
    def __init__(self, reply: Any, model: str | None = None) -> None:
        self.reply = reply
        self.calls: list[list[dict[str, Any]]] = []
        self.gate: asyncio.Event | None = None
        if model is not None:
            self.config = type("Config", (), {"model": model})()

    async def __call__(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        self.calls.append(messages)
        if self.gate is not None:
            await self.gate.wait()
        if isinstance(self.reply, BaseException):
            raise self.reply
        return str(self.reply)


def _turn(i: int, size: int = 400) -> list[Message]:
    return [
        user(f"request {i}: fix module_{i}.py " + "u" * size),
        assistant(None, [tool_call(f"c{i}", "run_shell", f'{{"command": "cat src/module_{i}.py"}}')]),
        tool_result(f"c{i}", "exit code 0\n" + "t" * size),
        assistant(f"Done with {i}. Next I will look at module_{i + 1}.py."),
    ]


def _session(tmp_path: Path, turns: int = 6) -> Session:
    s = Session.create(tmp_path / "s", "t")
    for i in range(turns):
        s.extend(_turn(i))
    return s


def _compactor(s: Session, llm: Any, mode: str, window: int = 2_000, **kw: Any) -> Compactor:
    settings = Settings(max_tokens=100, compact_threshold_ratio=0.5, reserve_ratio=0.2, summary_max_tokens=300,
                        summary_mode=mode, **kw)
    return Compactor(s, settings, llm, window=WindowInfo(window, 100, "override"))


# --------------------------------------------------------------------------- the setting


def test_auto_mode_is_the_digest_on_the_bundled_model_only() -> None:
    assert resolve_mode(Settings()) == "digest"  # the default model is the bundled one
    assert resolve_mode(Settings(model="openai/gpt-4o")) == "both"
    assert resolve_mode(Settings(model="openai/gpt-4o"), FakeLLM("", model=LOCAL_MODEL)) == "digest"
    assert resolve_mode(Settings(), FakeLLM("", model="anthropic/claude-x")) == "both"
    for mode in ("digest", "model", "both"):
        assert resolve_mode(Settings(summary_mode=mode)) == mode


def test_setting_from_the_environment_and_a_bad_value(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path / "none.toml", env={"CTXBENCH_SUMMARY_MODE": "both"})
    assert loaded.settings.summary_mode == "both" and loaded.problems == []
    bad = load_settings(tmp_path / "none.toml", env={"CTXBENCH_SUMMARY_MODE": "fast"})
    assert bad.settings.summary_mode == "auto"
    assert len(bad.problems) == 1 and "summary_mode" in bad.problems[0] and "'fast'" in bad.problems[0]
    with pytest.raises(ValueError, match="summary_mode"):
        Settings().replace(summary_mode="narrative")


# --------------------------------------------------------------------------- modes through the Compactor


@pytest.mark.asyncio
async def test_digest_mode_needs_no_model_and_compacts_incrementally(tmp_path: Path) -> None:
    s = _session(tmp_path)
    llm = FakeLLM("never asked")
    c = _compactor(s, llm, "digest")
    ev = await c.run_auto()
    assert ev is not None and ev.result == "summarized" and llm.calls == []
    first = s.summary
    assert check_summary(first) == (True, "")
    facts = parse_digest(first)
    assert [r.text[:9] for r in facts.requests] == [f"request {i}" for i in range(ev.messages_compacted // 4)]
    day = archive.list_days(s.path)[0]
    assert facts.archive == {day: len(archive.read_day(s.path, day))}
    # more work, a second compaction: the earlier facts stay, the new ones join, nothing twice
    for i in range(6, 12):
        s.extend(_turn(i))
    ev2 = await c.run_auto()
    assert ev2 is not None and ev2.result == "summarized"
    second = s.summary
    reqs = [r.text.split(":")[0] for r in parse_digest(second).requests]
    assert reqs[: len(facts.requests)] == [r.text.split(":")[0] for r in facts.requests]
    assert len(reqs) == len(set(reqs)) and len(reqs) > len(facts.requests)
    assert parse_digest(second).archive == {day: len(archive.read_day(s.path, day))}
    # undo the second: the first summary is back; compacting again gives the second again
    await c.undo()
    assert s.summary == first
    await c.run_auto()
    assert s.summary == second


@pytest.mark.asyncio
async def test_both_mode_appends_the_narrative_and_survives_a_failed_model(tmp_path: Path) -> None:
    s = _session(tmp_path)
    llm = FakeLLM(NARRATIVE)
    c = _compactor(s, llm, "both")
    await c.run_auto()
    (request,) = llm.calls
    assert "<digest>" in request[1]["content"] and "request 0" in request[1]["content"]
    assert "narrative" in request[0]["content"].lower()
    digest, narrative = s.summary.split(f"\n\n{NARRATIVE_HEADING} (written by ")
    assert check_summary(digest)[0] and narrative.endswith(NARRATIVE)
    # the next compaction hands the earlier summary to the model and keeps no stale narrative
    for i in range(6, 12):
        s.extend(_turn(i))
    c.summarize = FakeLLM(RuntimeError("503 overloaded"))
    ev = await c.run_auto()
    assert ev is not None and ev.result == "summarized"
    assert NARRATIVE_HEADING not in s.summary and check_summary(s.summary)[0]
    assert "request 0" in s.summary and "request 6" in s.summary


@pytest.mark.asyncio
async def test_model_mode_gets_the_digest_and_keeps_the_old_check(tmp_path: Path) -> None:
    s = _session(tmp_path)
    s.set_summary("## Goal\nearlier")
    llm = FakeLLM("just prose")
    c = _compactor(s, llm, "model")
    ev = await c.run_auto()
    assert "<digest>" in llm.calls[0][1]["content"] and "<previous-summary>" in llm.calls[0][1]["content"]
    assert ev is not None and ev.result == "dropped" and s.summary.startswith("## Goal\nearlier\n\n[")


@pytest.mark.asyncio
async def test_digest_mode_compacts_before_a_call_without_any_summarizer(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=12)
    c = _compactor(s, None, "digest", window=3_000)
    assert c.over_budget()
    ev = await c.proactive()
    assert ev is not None and ev.result == "summarized" and not c.over_budget()
    assert "[Emergency" not in s.summary


# --------------------------------------------------------------------------- the preview in two steps


@pytest.mark.asyncio
async def test_preview_now_then_the_model(tmp_path: Path) -> None:
    s = _session(tmp_path)
    llm = FakeLLM(NARRATIVE, model="openai/gpt-4o")
    c = _compactor(s, llm, "auto")
    quick = c.preview_now("keep paths")
    assert llm.calls == [] and quick.plan.needed
    part = quick.summary
    assert isinstance(part, Summary) and part.mode == "both" and part.model_pending and part.valid
    assert part.text == part.digest and "digest" in part.costs() and "writing" in part.costs()
    assert quick.after.summary > 0 and quick.after.history < quick.before.history
    full = await c.complete_preview(quick)
    assert len(llm.calls) == 1 and "keep paths" in llm.calls[0][1]["content"]
    done = full.summary
    assert isinstance(done, Summary) and not done.model_pending and done.text.endswith(NARRATIVE)
    assert done.model_tokens_in > 0 and done.model_tokens_out > 0 and "openai/gpt-4o" in done.costs()
    assert full.plan is quick.plan and full.base_summary == quick.base_summary
    ev = await c.apply(full)
    assert ev.result == "summarized" and s.summary == done.text


@pytest.mark.asyncio
async def test_the_digest_can_be_applied_while_the_model_writes(tmp_path: Path) -> None:
    s = _session(tmp_path)
    llm = FakeLLM(NARRATIVE, model="openai/gpt-4o")
    llm.gate = asyncio.Event()
    c = _compactor(s, llm, "both")
    quick = c.preview_now()
    writing = asyncio.create_task(c.complete_preview(quick))
    await asyncio.sleep(0.01)
    assert not writing.done()
    writing.cancel()
    ev = await c.apply(quick)
    assert ev.result == "summarized" and s.summary == quick.summary.text
    assert NARRATIVE_HEADING not in s.summary


@pytest.mark.asyncio
async def test_an_unusable_model_reply_never_replaces_the_digest_in_the_preview(tmp_path: Path) -> None:
    """Issue 27: summary mode "model" — a reply without the six sections leaves the digest in the editor (what
    Apply uses), the reply kept apart with why it is not used."""
    s = _session(tmp_path)
    llm = FakeLLM("just prose")
    c = _compactor(s, llm, "model")
    quick = c.preview_now()
    digest = quick.summary
    assert isinstance(digest, Summary) and digest.valid and digest.model_pending
    done = await c.complete_preview(quick)
    part = done.summary
    assert isinstance(part, Summary)
    assert part.text == digest.text and part.valid and not part.model_pending
    assert part.model_text == "just prose" and part.model_problem
    assert done.after.summary > 0  # the after bar is drawn with the digest
    # a usable reply is the summary, as before
    reply = "\n\n".join(f"## {name}\nthe model's {name.lower()}" for name in SECTIONS)
    good = _compactor(s, FakeLLM(reply), "model")
    done = await good.complete_preview(good.preview_now())
    assert done.summary.text == reply and done.summary.valid and not done.summary.model_problem
