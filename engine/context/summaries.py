"""Compaction summaries in three modes, all built on the digest (:mod:`engine.context.digest_text`).

- ``digest`` — the digest alone: no model call, milliseconds, always valid. The default on the
  bundled offline model (``local/…``), which cannot summarise a long agent run.
- ``model`` — the model writes the six sections itself, given the digest (the exact facts) and the
  messages fitted to its window; its text is the summary, checked as before (a reply that is empty
  or lacks the sections is no summary: the messages leave with a note, archived).
- ``both`` — the digest, then the model's narrative under ``## Narrative``: the factual lists come
  from the digest and are never lost, the model adds the story (why, decisions, what next). The
  default on any other model. A failed narrative leaves the digest alone.

The setting is ``summary_mode`` (``auto`` | ``digest`` | ``model`` | ``both``; ``auto`` = digest on
the bundled model, both elsewhere). The preview is made in two steps so the dialog shows the plan
and the digest at once: :func:`quick_preview` (pure but for counting the archive's lines; no model),
then :func:`complete_preview` (the model's part, when the mode has one). Each part reports what it
cost (tokens and time) in :class:`Summary`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from engine.context.digest_text import NARRATIVE_HEADING, build_digest, demote
from engine.context.plan import CompactionPlan
from engine.context.summary_call import (
    PROMPT_OVERHEAD_TOKENS,
    SummarizeFn,
    SummaryResult,
    build_summary_request,
    check_summary,
    cut_middle,
    normalize_summary,
)
from engine.context.tokens import estimate_text_tokens
from engine.model.messages import Message, message_date
from engine.model.snapshot import WindowInfo
from engine.store import archive
from engine.store.config import Settings

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from engine.store.session import StoredSession

SummaryMode = Literal["digest", "model", "both"]
SUMMARY_MODES: tuple[SummaryMode, ...] = ("digest", "model", "both")
NARRATIVE_PROMPT_PATH = Path(__file__).resolve().parents[2] / "resources" / "prompts" / "narrative.md"
NARRATIVE_MAX_WORDS = 300
DIGEST_SHARE = 0.25  # the digest's lists are shortened to fit this share of the context window


@dataclass
class Summary(SummaryResult):
    """A summary with the parts it was made of and what each cost."""

    mode: str = "digest"
    model: str = ""  # the summarizing model, "" when none was asked
    digest: str = ""
    digest_ms: float = 0.0
    digest_tokens: int = 0
    model_text: str = ""  # the model's reply as given (normalised)
    model_ms: float = 0.0
    model_tokens_in: int = 0  # estimated tokens of the request sent to the model
    model_tokens_out: int = 0  # estimated tokens of its reply
    model_problem: str = ""  # why the model's text was not used ("" when it was, or not asked)
    model_pending: bool = False  # the model's part is still to come (the preview shows the digest first)

    def costs(self) -> str:
        """One line: what the digest and the model's part cost."""
        parts = [f"digest {self.digest_tokens:,} tokens in {self.digest_ms:.0f} ms"]
        if self.model_pending:
            parts.append(f"{self.model or 'the model'}: writing…")
        elif self.model and (self.model_ms or self.model_problem):
            parts.append(
                f"{self.model}: {self.model_tokens_in:,} tokens in → {self.model_tokens_out:,} out, "
                f"{self.model_ms / 1000:.1f} s" + (f" ({self.model_problem})" if self.model_problem else "")
            )
        return " · ".join(parts)


def summary_figures(result: SummaryResult) -> dict[str, Any]:
    """The mode and the cost of each part, for the CLI's JSON (empty for a plain result)."""
    if not isinstance(result, Summary):
        return {}
    return {
        "summary_mode": result.mode, "summary_model": result.model, "digest_ms": round(result.digest_ms, 1),
        "digest_tokens": result.digest_tokens, "model_ms": round(result.model_ms, 1),
        "model_tokens_in": result.model_tokens_in, "model_tokens_out": result.model_tokens_out,
        "model_problem": result.model_problem,
    }


def resolve_mode(settings: Settings, summarize: SummarizeFn | None = None) -> SummaryMode:
    """The mode in force: the setting, or for ``auto`` the digest on the bundled model, both elsewhere."""
    chosen = settings.summary_mode
    if chosen in SUMMARY_MODES:
        return chosen
    from engine.llm.local_model import is_local

    return "digest" if is_local(summarizer_model(settings, summarize)) else "both"


def summarizer_model(settings: Settings, summarize: SummarizeFn | None) -> str:
    config = getattr(summarize, "config", None)
    model = getattr(config, "model", None)
    return model if isinstance(model, str) and model else settings.model


def mode_label(mode: SummaryMode, model: str) -> str:
    """How the preview names the mode."""
    if mode == "digest":
        return "digest — no model"
    if mode == "model":
        return f"model ({model}), given the digest"
    return f"digest + narrative by {model}"


@cache
def load_narrative_prompt() -> str:
    return NARRATIVE_PROMPT_PATH.read_text(encoding="utf-8")


def archive_lines_after(session_dir: Path, messages: Sequence[Message]) -> dict[str, int]:
    """Lines each ``dialog/<day>.jsonl`` will hold once ``messages`` are archived (a message whose
    id is already there is not written again)."""
    from engine.store.fsutil import json_loads

    days: dict[str, list[Message]] = {}
    for m in messages:
        days.setdefault(message_date(m).isoformat(), []).append(m)
    out: dict[str, int] = {}
    for day, msgs in days.items():
        path = archive.day_path(session_dir, day)
        lines = 0
        present: set[str] = set()
        if path.exists():
            for raw in path.read_bytes().splitlines():
                if not raw.strip():
                    continue
                lines += 1
                try:
                    obj = json_loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                    present.add(obj["id"])
        out[day] = lines + sum(1 for m in msgs if not (isinstance(m.get("id"), str) and m["id"] in present))
    return out


# --------------------------------------------------------------------------- the two parts


def digest_part(
    mode: SummaryMode,
    compacted: Sequence[Message],
    previous_summary: str,
    *,
    archive_lines: Mapping[str, int] | None = None,
    count: Callable[[str], int] = estimate_text_tokens,
    model: str = "",
    max_chars: int | None = None,
) -> Summary:
    """The digest of a compaction, as a valid summary; the model's part pending when the mode has one.

    In ``digest`` mode an earlier model narrative is kept as written; in the other modes the model
    is given the earlier summary and rewrites it.
    """
    t0 = time.perf_counter()
    text = build_digest(
        compacted, previous_summary, archive_lines=archive_lines, keep_narrative=mode == "digest", max_chars=max_chars
    )
    ms = (time.perf_counter() - t0) * 1000
    valid, reason = check_summary(text)
    return Summary(
        text, valid, reason, ms, mode=mode, model="" if mode == "digest" else model, digest=text,
        digest_ms=ms, digest_tokens=count(text), model_pending=mode != "digest",
    )


def model_request(
    mode: SummaryMode,
    digest: str,
    compacted: Sequence[Message],
    previous_summary: str,
    instruction: str | None,
    budget_chars: int,
) -> list[dict[str, Any]]:
    """The request for the model's part: the digest first (the exact facts), then the messages fitted
    to what is left of the budget."""
    shown = cut_middle(digest, budget_chars // 2)  # the digest takes at most half the room
    room = max(1_000, budget_chars - len(shown) - 500)
    request = build_summary_request(compacted, previous_summary, instruction, budget_chars=room)
    facts = (
        "These facts were extracted exactly from the messages (the digest). Copy paths, commands, "
        f"errors and the user's words from here.\n\n<digest>\n{shown}\n</digest>\n\n"
    )
    request[1] = {"role": "user", "content": facts + str(request[1]["content"])}
    if mode == "both":
        request[0] = {"role": "system", "content": load_narrative_prompt()}
        request[1]["content"] = str(request[1]["content"]).replace(
            "Write the updated summary now, with the six sections.",
            f"Write the narrative now (at most {NARRATIVE_MAX_WORDS} words, no headings).",
        )
    return request


def combine(digest: str, narrative: str, model: str) -> str:
    """The digest with the model's narrative after it (headings demoted: the six sections stay ours)."""
    body = "\n".join(demote(line) for line in narrative.strip().splitlines())
    return f"{digest}\n\n{NARRATIVE_HEADING} (written by {model})\n{body}"


async def model_part(
    part: Summary,
    summarize: SummarizeFn | None,
    compacted: Sequence[Message],
    previous_summary: str,
    instruction: str | None,
    max_tokens: int,
    budget_chars: int,
    count: Callable[[str], int] = estimate_text_tokens,
) -> Summary:
    """The summary once the model's part is in: ``model`` mode gives the reply (checked), ``both``
    appends it to the digest as the narrative (a failed or empty one leaves the digest alone)."""
    if part.mode == "digest":
        return replace(part, model_pending=False)
    mode = cast(SummaryMode, part.mode)
    if summarize is None:
        why = "no summarizer is configured"
        if mode == "model":
            return replace(part, text="", valid=False, reason=why, model_problem=why, model_pending=False)
        return replace(part, model_pending=False, model_problem=why)
    request = model_request(mode, part.digest, compacted, previous_summary, instruction, budget_chars)
    tokens_in = sum(count(str(m["content"])) for m in request)
    t0 = time.perf_counter()
    try:
        reply = await summarize(request, max_tokens)
        problem = ""
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # provider boundary (the injected summarizer): it failed, the digest stays
        log.warning("the summary call failed", exc_info=True)
        reply, problem = "", f"the summary call failed: {type(exc).__name__}: {exc}"
    ms = (time.perf_counter() - t0) * 1000
    text = normalize_summary(reply if isinstance(reply, str) else "")
    costs: dict[str, Any] = dict(duration_ms=part.digest_ms + ms, model_text=text, model_ms=ms,
                                 model_tokens_in=tokens_in, model_tokens_out=count(text), model_pending=False)
    if mode == "model":  # the model's own summary, as it wrote it: unusable means no new summary
        ok, why = check_summary(text) if not problem else (False, problem)
        return replace(part, text=text, valid=ok, reason=why, model_problem=why, **costs)
    if not problem and not text:
        problem = "the model's narrative is empty"
    if problem:  # the digest stands alone
        return replace(part, model_problem=problem, **costs)
    return replace(part, text=combine(part.digest, text, part.model), valid=True, reason="", **costs)


def editor_summary(digest_part: Summary, done: Summary) -> Summary:
    """The summary the compaction preview's editor gets once the model's part is in: in ``model`` mode an unusable
    reply never replaces a usable digest — the digest stays the text (and what Apply uses), the reply is kept apart
    (``model_text``) with why it is not used (``model_problem``)."""
    if done.mode != "model" or done.valid or not digest_part.valid or not digest_part.text.strip():
        return done
    return replace(done, text=digest_part.text, valid=True, reason="",
                   model_problem=done.model_problem or done.reason or "the model's reply is not a usable summary")


# --------------------------------------------------------------------------- for the Compactor


def _budget_chars(window: WindowInfo, settings: Settings, summarize: SummarizeFn | None) -> int:
    size = window.context_window
    own = getattr(summarize, "context_window", None)  # the summarizing model's limit, if known
    if isinstance(own, int) and 0 < own < size:
        size = own
    budget_tokens = size - settings.summary_max_tokens - PROMPT_OVERHEAD_TOKENS
    return max(2_000, budget_tokens * 5 // 2)


def plan_digest(
    plan: CompactionPlan,
    settings: Settings,
    summarize: SummarizeFn | None,
    session: StoredSession,
    count: Callable[[str], int],
    window: WindowInfo,
    mode: SummaryMode | None = None,
) -> Summary:
    """The digest part for a plan of ``session``."""
    mode = mode or resolve_mode(settings, summarize)
    lines = archive_lines_after(session.path, plan.compact)
    return digest_part(
        mode, plan.compact, session.summary, archive_lines=lines, count=count,
        model=summarizer_model(settings, summarize),
        max_chars=int(window.context_window * DIGEST_SHARE) * 5 // 2,  # tokens → characters, as the heuristic counts
    )


async def summarize_plan(
    plan: CompactionPlan,
    settings: Settings,
    summarize: SummarizeFn | None,
    session: StoredSession,
    count: Callable[[str], int],
    window: WindowInfo,
    instruction: str | None = None,
) -> Summary:
    """Both parts for a plan (the automatic paths and the CLI)."""
    part = plan_digest(plan, settings, summarize, session, count, window)
    if not part.model_pending:
        return part
    return await complete_model_part(part, plan, session.summary, instruction, settings, summarize, count, window)


async def complete_model_part(
    part: Summary,
    plan: CompactionPlan,
    base_summary: str,
    instruction: str | None,
    settings: Settings,
    summarize: SummarizeFn | None,
    count: Callable[[str], int],
    window: WindowInfo,
) -> Summary:
    """The model's part of a summary whose digest is made (a preview's, or the automatic paths')."""
    return await model_part(
        part, summarize, plan.compact, base_summary, instruction,
        settings.summary_max_tokens, _budget_chars(window, settings, summarize), count,
    )
