"""ATIF trajectories: the Agent Trajectory Interchange Format of the Harbor framework (its RFC 0001), one JSON
document (``trajectory.json``) with ``schema_version`` ``"ATIF-v1.0"`` … ``"ATIF-v1.8"`` (v1.8: Harbor 0.25.0's
models, audio content parts).

- ``steps`` in order: the ``system`` steps before the conversation are the system prompt, a later one a user
  message named ``system`` (an instruction sent among the messages, as Codex's developer messages) unless it holds
  an observation (a system-initiated operation: delegation, reset, checkpoint; its results are read, its message
  only describes it); a ``user`` step is a user message; an ``agent`` step is an assistant message (``message``,
  ``reasoning_content``, ``tool_calls`` as OpenAI tool calls) followed by its ``observation``: a result naming one
  of the step's calls (``source_call_id``) is the tool message answering it, any other result (an action without
  tool calling, Terminus-2's terminal output) is the environment's feedback, a user message.
- One provider call per ``agent`` step (the RFC's one-LLM-per-step convention) with its ``metrics``:
  ``prompt_tokens`` the whole prompt, cached part included (v1.2 made that explicit), ``cached_tokens`` the cache
  read, ``completion_tokens``, ``cost_usd`` the agent's own cost of the call, and from ``metrics.extra`` where given
  (as Harbor's Claude Code and Codex converters write it) ``cache_creation_input_tokens`` the cache write
  (``cache_creation.ephemeral_1h_input_tokens`` its one-hour part), ``reasoning_tokens`` or
  ``reasoning_output_tokens``; the model is the step's ``model_name`` or the agent's. No call for a step copied from
  an earlier trajectory (``is_copied_context``, v1.5: its call is counted where it was made) nor for a deterministic
  dispatch (``llm_call_count`` 0, v1.7); a step standing for several LLM calls (``llm_call_count`` > 1) is one call
  whose prompt figure is a sum over them, not one context: it is left out (said in the notes).
- Before v1.2 ``cached_tokens`` was not said to be part of ``prompt_tokens``: a v1.0 / v1.1 figure of cached tokens
  above the prompt's is read as apart from it (prompt = both, noted). ``prompt_token_ids`` (v1.4) and
  ``completion_token_ids`` (v1.3) give a count where the figure itself is missing.
- ``agent.tool_definitions`` (v1.5): the tool definitions; with the system steps, every call's request prefix as
  the file records it (a file without them: the prefix is inferred at import). Content parts (v1.6): text, images
  as ``[image: path]``, audio (v1.8) as ``[audio: path (type, seconds)]``.
- Subagents: each ``subagent_trajectory_ref`` of an observation result is read as a child session: by
  ``trajectory_path`` (a file beside this one, or an absolute path) or, from v1.7, by ``trajectory_id`` in the
  root's ``subagent_trajectories`` (embedded); one that cannot be resolved is listed with the reason.
- A ``system`` step with ``extra.context_management.boundary == "replace"`` (v1.7) is a compaction whose summary
  is its observation's content.
- ``final_metrics`` is kept as the aggregate it is and checked against the steps' sums (a difference is a note).
- ``continued_trajectory_ref``: the file the trajectory continues in (Harbor's Terminus-2 writes ``trajectory.cont-1
  .json`` … when it hands the task over after summarizing), read on as the same session after a compaction whose
  context after is the continuation's copied steps; the last file's ``final_metrics`` are the whole run's.

A document that is not JSON, has no ATIF ``schema_version``, or lacks a required field (``agent.name``,
``steps``, a step's ``source`` or ``message``, a tool call's ``tool_call_id`` / ``function_name``) is a
SourceError naming what is wrong; a later minor version than v1.8 is read as v1.8, with a notice. Required
fields the reader does without (``agent.version``, ``session_id`` before v1.7, ``step_id`` numbering) are notes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    Compaction,
    ProviderCall,
    RequestPrefix,
    SourceError,
    SourceSession,
    SubagentRef,
    _decode,
    dict_at,
    float_or_none,
    int_or_none,
    iso,
    json_args,
    read_regular,
)

LATEST_MINOR = 8  # ATIF-v1.8 (Harbor 0.25.0), the newest version this reader knows
PREFIX_KEY = "agent.tool_definitions"  # the one request prefix of a trajectory that records its tool definitions
VERSION_RE = re.compile(r"ATIF-v(\d{1,4})\.(\d{1,4})")
SOURCES = ("system", "user", "agent")
MAX_PARTS = 64  # a trajectory and the files it continues in, read as one session: at most this many files
_FINAL_NOTE = "final_metrics."  # how a note of final_metrics against the steps begins
MAX_DEPTH = 8  # subagents of subagents … read this deep (a trajectory referring to itself stops there)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def is_atif_document(obj: Any) -> bool:
    """Whether a JSON value says it is an ATIF trajectory (its ``schema_version`` starts with ``ATIF-``)."""
    return isinstance(obj, dict) and isinstance(obj.get("schema_version"), str) \
        and obj["schema_version"].startswith("ATIF-")


def parse_version(value: Any, where: str) -> tuple[int, int]:
    """``(1, minor)`` of an ``"ATIF-v1.<minor>"`` schema version; SourceError naming ``where`` otherwise."""
    match = VERSION_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        shown = json.dumps(value)[:60] if value is not None else "none"
        raise SourceError(f"{where}: schema_version {shown} is not an ATIF version (\"ATIF-v1.0\" … "
                          f"\"ATIF-v1.{LATEST_MINOR}\")")
    major, minor = int(match.group(1)), int(match.group(2))
    if major != 1:
        raise SourceError(f"{where}: {value} is a major version this reader does not know (it reads ATIF-v1.0 … "
                          f"ATIF-v1.{LATEST_MINOR})")
    return major, minor


def load_document(path: Path) -> dict[str, Any]:
    """The JSON object of ``path``; SourceError when it is not JSON or not an object."""
    try:
        data = _decode(read_regular(path).decode("utf-8-sig"))  # a raw control character in a string: kept
    except SourceError:
        raise
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError too: not UTF-8
        raise SourceError(f"{Path(path).name}: not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict):
        raise SourceError(f"{Path(path).name}: an ATIF trajectory is a JSON object, not a {type(data).__name__}")
    return data


def _where(name: str, n: int, step: Any) -> str:
    sid = step.get("step_id") if isinstance(step, dict) else None
    return f"{name}: steps[{n}]" + (f" (step_id {sid})" if isinstance(sid, int) else "")


def validate(doc: dict[str, Any], name: str) -> tuple[int, int]:
    """Check the fields ATIF requires; SourceError naming the first one missing or of the wrong type."""
    version = parse_version(doc.get("schema_version"), name)
    agent = doc.get("agent")
    if not isinstance(agent, dict):
        raise SourceError(f"{name}: no \"agent\" object (required: the agent's name and version)")
    if not isinstance(agent.get("name"), str) or not agent["name"]:
        raise SourceError(f"{name}: agent.name is missing (required)")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise SourceError(f"{name}: no \"steps\" array (required)")
    if not steps:
        raise SourceError(f"{name}: \"steps\" is empty (an ATIF trajectory has at least one step)")
    for n, step in enumerate(steps):
        where = _where(name, n, step)
        if not isinstance(step, dict):
            raise SourceError(f"{where}: not an object ({json.dumps(step)[:40]}): a step is an object")
        if step.get("source") not in SOURCES:
            raise SourceError(f"{where}: source {json.dumps(step.get('source'))[:40]} is none of system, user, "
                              "agent (required)")
        if "message" not in step or not isinstance(step["message"], str | list):
            raise SourceError(f"{where}: no message (required: a string, or content parts from v1.6)")
        calls = step.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise SourceError(f"{where}: tool_calls is not an array")
        for k, call in enumerate(calls or []):
            if not isinstance(call, dict) or not isinstance(call.get("tool_call_id"), str) \
                    or not isinstance(call.get("function_name"), str):
                raise SourceError(f"{where}: tool_calls[{k}] lacks tool_call_id or function_name (required)")
        obs = step.get("observation")
        if obs is not None and not (isinstance(obs, dict) and isinstance(obs.get("results"), list)):
            raise SourceError(f"{where}: observation without a \"results\" array (required)")
    return version


def content_text(content: Any) -> str:
    """A message or a result's content: a string, or (v1.6) content parts — text, and images as their path."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    out = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict) and part.get("type") in ("image", "audio"):  # audio: v1.8
            source = dict_at(part, "source")
            about = [str(source["media_type"])] if isinstance(source.get("media_type"), str) else []
            if (seconds := float_or_none(source.get("duration_sec"))) is not None:
                about.append(f"{seconds:g} s")
            shown = f" ({', '.join(about)})" if about else ""
            out.append(f"[{part['type']}: {source.get('path') or '?'}{shown}]")
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
    return "\n".join(out)


def flat_tools(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI ``{"type": "function", "function": {…}}`` definitions as the tool objects a request prefix lists
    (``name``, ``description``, ``parameters``); one of another shape is kept as it is."""
    out = []
    for tool in definitions:
        fn = tool.get("function")
        out.append({k: fn[k] for k in ("name", "description", "parameters") if k in fn}
                   if isinstance(fn, dict) and isinstance(fn.get("name"), str) else tool)
    return out


@dataclass
class _Read:
    """One document being read: its session, version and what it embeds (v1.7)."""

    session: SourceSession
    minor: int
    doc: dict[str, Any]
    depth: int
    embedded: dict[str, dict[str, Any]] = field(default_factory=dict)
    subagent_ids: set[str] = field(default_factory=set)


def _count(metrics: dict[str, Any], figure: str, ids: str) -> int | None:
    value = int_or_none(metrics.get(figure))
    if value is None and isinstance(metrics.get(ids), list):  # v1.3 / v1.4: the tokens themselves
        value = len(metrics[ids])
    return value


def _call(read: _Read, step: dict[str, Any], index: int, model: str) -> ProviderCall | None:
    """The provider call of an agent step (None: copied context, a dispatch without an LLM, or several calls)."""
    session, sid = read.session, step.get("step_id")
    if step.get("is_copied_context") is True:
        session.ignore("agent step copied from an earlier trajectory (is_copied_context: its call is counted there)")
        return None
    count = int_or_none(step.get("llm_call_count"))
    if count == 0:
        session.ignore("agent step without an LLM call (llm_call_count 0: a deterministic dispatch)")
        return None
    metrics = dict_at(step, "metrics")
    extra = dict_at(metrics, "extra")
    prompt = _count(metrics, "prompt_tokens", "prompt_token_ids")
    cached = int_or_none(metrics.get("cached_tokens"))
    if count is not None and count > 1:
        session.notes.append(f"step {sid}: its metrics sum {count} LLM calls (llm_call_count): their prompt figure "
                             "is no one context's size and is left out")
        prompt = cached = None
    elif read.minor < 2 and prompt is not None and cached is not None and cached > prompt:
        session.notes.append(f"step {sid}: {cached} cached tokens above {prompt} prompt tokens (ATIF before v1.2 did "
                             "not count the cached part in the prompt): read as a prompt of both")
        prompt += cached
    cost = float_or_none(metrics.get("cost_usd"))
    call = ProviderCall(
        index=len(session.calls), prompt_tokens=prompt,
        completion_tokens=_count(metrics, "completion_tokens", "completion_token_ids"), cache_read_tokens=cached,
        cache_write_tokens=int_or_none(extra.get("cache_creation_input_tokens")), model=model,
        ts=iso(step.get("timestamp")), message_index=index, request_id=f"step-{sid}" if sid is not None else "",
        reasoning_tokens=int_or_none(extra.get("reasoning_tokens", extra.get("reasoning_output_tokens"))),
        cache_write_1h_tokens=int_or_none(dict_at(extra, "cache_creation").get("ephemeral_1h_input_tokens")),
        cost_usd=cost)
    if cost is not None:
        session.agent_cost_usd = (session.agent_cost_usd or 0.0) + cost
        session.agent_cost_by_model[model] = session.agent_cost_by_model.get(model, 0.0) + cost
    return call


def _add(session: SourceSession, msg: Message, ts: str) -> int:
    msg["id"] = session.make_id()
    msg["ts"] = ts
    session.messages.append(msg)
    return len(session.messages) - 1


def _agent_step(read: _Read, step: dict[str, Any], ts: str) -> None:
    session = read.session
    model = str(step.get("model_name") or dict_at(read.doc, "agent").get("model_name") or "")
    msg: Message = {"role": "assistant", "content": content_text(step.get("message")) or None}
    if isinstance(step.get("reasoning_content"), str) and step["reasoning_content"]:
        msg["reasoning_content"] = step["reasoning_content"]
    calls = [{"id": c["tool_call_id"], "type": "function",
              "function": {"name": c["function_name"], "arguments": json_args(c.get("arguments") or {})}}
             for c in step.get("tool_calls") or []]
    if calls:
        msg["tool_calls"] = calls
    index = _add(session, msg, ts)
    call = _call(read, step, index, model)
    if call is not None:
        session.calls.append(call)
        session.model = model or session.model
    _observation(read, step, {c["id"] for c in calls}, ts)


def _observation(read: _Read, step: dict[str, Any], call_ids: set[str], ts: str) -> list[str]:
    """The step's observation results as messages (tool messages for its calls, else user messages); returns the
    results' texts. Each subagent reference becomes a child session, linked from the result's message."""
    texts = []
    answered: set[str] = set()
    for result in dict_at(step, "observation").get("results") or []:
        if not isinstance(result, dict):
            read.session.ignore("observation result that is not an object")
            continue
        text = content_text(result.get("content"))
        texts.append(text)
        call_id = result.get("source_call_id")
        refs = result.get("subagent_trajectory_ref")
        children = [_subagent(read, ref, call_id if call_id in call_ids else None)
                    for ref in (refs if isinstance(refs, list) else [])]
        if not text and not children and call_id not in call_ids:
            continue
        if step.get("source") == "system" and not text:
            continue  # a system event's delegation: the children are read, nothing entered the context
        if isinstance(call_id, str) and call_id in call_ids and call_id not in answered:
            answered.add(call_id)
            msg: Message = {"role": "tool", "tool_call_id": call_id, "content": text}
        else:
            msg = {"role": "user", "content": text}
        if children:
            msg["subagent"] = {"id": children[0]}
        _add(read.session, msg, ts)
    return texts


def _child_id(read: _Read, ref: dict[str, Any]) -> str:
    raw = str(ref.get("trajectory_id") or ref.get("session_id") or Path(str(ref.get("trajectory_path") or "x")).stem)
    base = _UNSAFE.sub("_", raw).strip("._")[:80] or "subagent"
    name, n = base, 1
    while name in read.subagent_ids:
        n += 1
        name = f"{base}-{n}"
    read.subagent_ids.add(name)
    return name


def _subagent(read: _Read, ref: Any, call_id: str | None) -> str:
    """Read the subagent a reference names as a child session; returns its id."""
    session = read.session
    ref = ref if isinstance(ref, dict) else {}
    sid = _child_id(read, ref)
    tid, rel = ref.get("trajectory_id"), ref.get("trajectory_path")
    child: SourceSession | None = None
    path: Path | None = None
    problem = ""
    try:
        if read.depth >= MAX_DEPTH:
            problem = f"not read: subagents nested more than {MAX_DEPTH} deep"
        elif isinstance(tid, str) and tid in read.embedded:
            path = session.path
            child = read_document(read.embedded[tid], session.path, depth=read.depth + 1, embedded=read.embedded)
        elif isinstance(rel, str) and rel:
            if "://" in rel:
                problem = f"trajectory_path {rel!r} is not a local file"
            else:
                path = Path(rel) if Path(rel).is_absolute() else session.path.parent / rel
                if not path.is_file():
                    problem, path = f"trajectory_path {rel!r}: no such file beside {session.path.name}", None
                else:
                    child = read_document(load_document(path), path, depth=read.depth + 1)
        elif isinstance(tid, str):
            problem = f"trajectory_id {tid!r} is not among the embedded subagent_trajectories"
        else:
            problem = ("a reference by session_id only (ATIF before v1.7): no trajectory_path or trajectory_id "
                       "to read it from")
    except SourceError as exc:
        problem, child = f"cannot be read: {exc}", None
    if problem:
        session.notes.append(f"subagent {sid}: {problem}")
    session.subagents.append(SubagentRef(sid, "task", path, call_id, child, problem))
    return sid


def _system_step(read: _Read, step: dict[str, Any], ts: str, system: list[str]) -> None:
    session = read.session
    text = content_text(step.get("message"))
    if not session.messages and not session.compactions:
        system.append(text)
        _observation(read, step, set(), ts)
        return
    management = dict_at(dict_at(step, "extra"), "context_management")
    if management.get("boundary") == "replace":  # v1.7: the context from here is the observation's content
        before = next((c.prompt_tokens for c in reversed(session.calls) if c.prompt_tokens), None)
        summary = "\n\n".join(t for t in (content_text(r.get("content")) for r in dict_at(step, "observation")
                                          .get("results") or [] if isinstance(r, dict)) if t)
        session.compactions.append(Compaction(
            index=len(session.compactions), trigger="unknown",
            trigger_source=str(management.get("type") or "context_management"), ts=ts,
            message_index=len(session.messages), calls_before=len(session.calls), tokens_before=before,
            summary=summary))
        for result in dict_at(step, "observation").get("results") or []:
            refs = result.get("subagent_trajectory_ref") if isinstance(result, dict) else None
            for ref in refs if isinstance(refs, list) else []:
                _subagent(read, ref, None)
        return
    if "observation" in step:  # a system-initiated operation (delegation, reset, checkpoint): its results are read
        session.ignore("system step of an operation of the harness (its message describes it; its results are read)")
    elif text:  # an instruction sent among the messages (as Codex's developer messages): in the context
        _add(session, {"role": "user", "name": "system", "content": text}, ts)
    _observation(read, step, set(), ts)


def _check_totals(session: SourceSession, final: dict[str, Any]) -> None:
    """``final`` (a document's ``final_metrics``) as the aggregate; a note where it differs from the sums of the
    session's calls (its steps' metrics) and its subagents'."""
    if not final:
        return
    session.aggregate = {k: v for k, v in final.items() if k != "extra"}
    sums: dict[str, float] = {}
    for calls in [session.calls, *(ref.session.calls for ref in session.subagents if ref.session is not None)]:
        for call in calls:
            for key, value in (("prompt", call.prompt_tokens), ("completion", call.completion_tokens),
                               ("cached", call.cache_read_tokens), ("cost", call.cost_usd)):
                if value is not None:
                    sums[key] = sums.get(key, 0) + value
    for key, total in (("prompt", "total_prompt_tokens"), ("completion", "total_completion_tokens"),
                       ("cached", "total_cached_tokens"), ("cost", "total_cost_usd")):
        stated = float_or_none(final.get(total))
        if stated is None or (key == "cached" and stated == 0 and key not in sums):
            continue
        if abs(stated - sums.get(key, 0)) > max(1e-6, 1e-6 * stated):
            session.notes.append(f"{_FINAL_NOTE}{total} is {stated:g}; the steps (and subagents) read sum "
                                 f"{sums.get(key, 0):g}")


def _lenient_notes(session: SourceSession, doc: dict[str, Any], minor: int) -> None:
    """Required fields the reader does without: said, not refused (producers outside Harbor often omit them)."""
    if not isinstance(dict_at(doc, "agent").get("version"), str):
        session.notes.append("agent.version is missing (ATIF requires it): read without it")
    if minor <= 6 and not isinstance(doc.get("session_id"), str):
        session.notes.append(f"session_id is missing (required before ATIF-v1.7; this file is v1.{minor})")
    wrong = next((n for n, step in enumerate(doc["steps"], start=1) if step.get("step_id") != n), None)
    if wrong is not None:
        shown = json.dumps(doc["steps"][wrong - 1].get("step_id"))[:40]
        session.notes.append(f"step_id of steps[{wrong - 1}] is {shown}, not {wrong} (ATIF numbers the steps 1, 2, "
                             "3 …): read in file order")


def read_document(doc: dict[str, Any], path: Path, *, depth: int = 0,
                  embedded: dict[str, dict[str, Any]] | None = None) -> SourceSession:
    """Read one ATIF document (the file at ``path``, or a trajectory embedded in it)."""
    return _read_document(doc, path, depth, embedded)[0]


def _read_document(doc: dict[str, Any], path: Path, depth: int = 0,
                   embedded: dict[str, dict[str, Any]] | None = None) -> tuple[SourceSession, int]:
    """:func:`read_document`, and the messages its first steps copied from an earlier trajectory made
    (``is_copied_context``: the context a continuation starts from)."""
    path = Path(path)
    _, minor = validate(doc, path.name if depth == 0 else f"{path.name} (subagent)")
    agent = dict_at(doc, "agent")
    sid = str(doc.get("session_id") or doc.get("trajectory_id") or path.stem)
    session = SourceSession("atif", path, sid, lines=len(doc["steps"]))
    if minor > LATEST_MINOR:
        session.notes.append(f"{doc['schema_version']} is newer than the versions this reader knows (ATIF-v1.0 … "
                             f"v1.{LATEST_MINOR}): read as ATIF-v1.{LATEST_MINOR}; fields it adds are left out")
    _lenient_notes(session, doc, minor)
    read = _Read(session, minor, doc, depth, dict(embedded or {}))
    for sub in doc.get("subagent_trajectories") or [] if isinstance(doc.get("subagent_trajectories"), list) else []:
        if isinstance(sub, dict) and isinstance(sub.get("trajectory_id"), str):
            read.embedded[sub["trajectory_id"]] = sub
    if isinstance(agent.get("tool_definitions"), list):
        session.tools = [t for t in agent["tool_definitions"] if isinstance(t, dict)]
    session.model = str(agent.get("model_name") or "")
    system: list[str] = []
    copied, copying = 0, True
    for step in doc["steps"]:
        if copying and step.get("is_copied_context") is not True:
            copied, copying = len(session.messages), False
        ts = iso(step.get("timestamp"))
        if ts:
            session.started = session.started or ts
            session.last_activity = ts
        if step["source"] == "system":
            _system_step(read, step, ts, system)
        elif step["source"] == "user":
            _add(session, {"role": "user", "content": content_text(step["message"])}, ts)
            _observation(read, step, set(), ts)
        else:
            _agent_step(read, step, ts)
    session.system_prompt = "\n\n".join(t for t in system if t)
    if session.tools:  # v1.5: the tools as the agent had them, and its system steps: every request's prefix, exact
        session.prefixes[PREFIX_KEY] = RequestPrefix(PREFIX_KEY, session.system_prompt, flat_tools(session.tools))
        for call in session.calls:
            call.prefix_key = PREFIX_KEY
    for comp in session.compactions:
        after = next((c for c in session.calls[comp.calls_before:] if c.prompt_tokens), None)
        comp.tokens_after = after.prompt_tokens if after else None
    session.live_start = session.compactions[-1].message_index if session.compactions else 0
    if copying:
        copied = len(session.messages)
    ref = doc.get("continued_trajectory_ref")
    if isinstance(ref, str) and ref:
        session.notes.append(_continues(ref, "not read here"))
    _check_totals(session, dict_at(doc, "final_metrics"))
    session.prefix_label = "system prompt and tool definitions" if not session.system_prompt else "tool definitions"
    return session, copied


def _continues(ref: str, how: str) -> str:
    return f"the trajectory continues in {ref} (continued_trajectory_ref), {how}"


def read_atif(path: Path) -> SourceSession:
    """Read an ATIF ``trajectory.json`` (steps are numbered from 1 in the report, as ``step_id`` is) and the files
    it continues in (``continued_trajectory_ref``: Harbor's Terminus-2 starts a new file when it hands the task over
    after summarizing, its linear history): one session, each continuation after a compaction (:func:`_join`)."""
    path = Path(path)
    doc = load_document(path)
    session = read_document(doc, path)
    seen = {path.resolve()}
    while isinstance(ref := doc.get("continued_trajectory_ref"), str) and ref:
        said = _continues(ref, "not read here")
        at = Path(ref) if Path(ref).is_absolute() else path.parent / ref
        problem = ""
        if "://" in ref:
            problem = "not read: not a local file"
        elif not at.is_file():
            problem = f"not read: no such file beside {path.name}"
        elif at.resolve() in seen:
            problem = "not read: a file this trajectory already read (a loop)"
        elif len(seen) >= MAX_PARTS:
            problem = f"not read: more than {MAX_PARTS} files"
        if not problem:
            try:
                following = load_document(at)
                part, copied = _read_document(following, at)
            except SourceError as exc:
                problem = f"cannot be read: {exc}"
        session.notes = [n for n in session.notes if n != said]
        if problem:
            session.notes.append(_continues(ref, problem))
            break
        _join(session, part, copied, at.name)
        seen.add(at.resolve())
        path, doc = at, following
    if len(seen) > 1:  # the last file's final_metrics are the whole run's (Harbor writes them so)
        session.notes = [n for n in session.notes if not n.startswith(_FINAL_NOTE)]
        _check_totals(session, dict_at(doc, "final_metrics"))
    return session


def _join(session: SourceSession, part: SourceSession, copied: int, name: str) -> None:
    """Append the continuation ``part`` (read from the file ``name``) to ``session``: a compaction where it starts
    (``trigger_source`` ``continued_trajectory_ref``) whose context after is the ``copied`` messages the
    continuation's first steps copied (``is_copied_context``) and whose summary is what of them the trajectory before
    did not hold (the hand-over), then its messages, calls, compactions and subagents, numbered on; its notes named
    by its file."""
    at, calls_before = len(session.messages), len(session.calls)
    held = {m.get("content") for m in session.messages if isinstance(m.get("content"), str)}
    summary = "\n\n".join(m["content"] for m in part.messages[:copied]
                           if isinstance(m.get("content"), str) and m["content"] and m["content"] not in held)
    session.compactions.append(Compaction(
        index=len(session.compactions), trigger="unknown", trigger_source="continued_trajectory_ref",
        ts=part.started or session.last_activity, message_index=at, calls_before=calls_before,
        tokens_before=next((c.prompt_tokens for c in reversed(session.calls) if c.prompt_tokens), None),
        tokens_after=next((c.prompt_tokens for c in part.calls if c.prompt_tokens), None), summary=summary,
        messages_after=copied))
    taken = {ref.id for ref in session.subagents}
    renamed: dict[str, str] = {}
    for ref in part.subagents:
        new, n = ref.id, 1
        while new in taken:
            n += 1
            new = f"{ref.id}-{n}"
        taken.add(new)
        renamed[ref.id], ref.id = new, new
        session.subagents.append(ref)
    for msg in part.messages:
        msg["id"] = session.make_id()
        if isinstance(link := msg.get("subagent"), dict) and link.get("id") in renamed:
            link["id"] = renamed[link["id"]]
        session.messages.append(msg)
    if PREFIX_KEY in part.prefixes and PREFIX_KEY not in session.prefixes:
        session.prefixes[PREFIX_KEY] = part.prefixes[PREFIX_KEY]
    own_prefix = PREFIX_KEY in part.prefixes and session.prefixes[PREFIX_KEY] != part.prefixes[PREFIX_KEY]
    if own_prefix:  # other tool definitions or system steps: that file's calls keep their own prefix
        key = f"{name}:{PREFIX_KEY}"
        session.prefixes[key] = RequestPrefix(key, part.prefixes[PREFIX_KEY].system, part.prefixes[PREFIX_KEY].tools)
    for call in part.calls:
        call.index += calls_before
        call.message_index = None if call.message_index is None else call.message_index + at
        if own_prefix:
            call.prefix_key = f"{name}:{PREFIX_KEY}"
        session.calls.append(call)
    for comp in part.compactions:
        comp.index = len(session.compactions)
        comp.message_index += at
        comp.calls_before += calls_before
        session.compactions.append(comp)
    session.tools = session.tools or part.tools
    if part.agent_cost_usd is not None:
        session.agent_cost_usd = (session.agent_cost_usd or 0.0) + part.agent_cost_usd
    for model, cost in part.agent_cost_by_model.items():
        session.agent_cost_by_model[model] = session.agent_cost_by_model.get(model, 0.0) + cost
    for kind, count in part.ignored.items():
        session.ignored[kind] = session.ignored.get(kind, 0) + count
    session.skipped += part.skipped
    session.notes += [f"{name}: {n}" for n in part.notes if not n.startswith(_FINAL_NOTE)
                      and "(continued_trajectory_ref)" not in n]
    session.model = part.model or session.model
    session.started = session.started or part.started
    session.last_activity = part.last_activity or session.last_activity
    session.lines += part.lines
    session.aggregate = part.aggregate  # (the whole run's; none said when the last file has none)
    session.live_start = session.compactions[-1].message_index


__all__ = ["LATEST_MINOR", "content_text", "is_atif_document", "load_document", "parse_version", "read_atif",
           "read_document", "validate"]
