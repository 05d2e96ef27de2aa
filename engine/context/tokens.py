"""Token estimators and the per-message cache.

Estimators, selectable in settings (``estimator``):

- ``heuristic``: the seeds' contract (chars × 2 // 5 plus flat media costs), pure and fast;
- ``exact``: the model's own tokenizer through ``litellm.token_counter`` (via :mod:`engine.llm.client`,
  the only module that imports litellm) — for the bundled offline model, llama.cpp's own tokenizer
  on the exact ChatML text the model is given (:class:`LocalEstimator`, no litellm needed);
- ``auto`` (the default): ``exact`` where the tokenizer is in the process (the bundled model),
  else ``heuristic`` (calibrated on the provider's reports from the first call on).

Both are wrapped by :class:`TokenCache` (per-message memo keyed by the message's token-relevant
fields) and :class:`TokenLedger` (the per-message counts and running total of one history, kept in
step with its edits so that a budget check after appending one message is O(1)).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from engine.model.messages import Message, content_text, media_count

MESSAGE_OVERHEAD_CHARS = 12
MEDIA_TOKENS = 256
TOOL_DEF_OVERHEAD_CHARS = 20


def _calls_chars(calls: Any) -> int:
    chars = 0
    for call in calls:
        if call.__class__ is not dict:
            continue
        value = call.get("id")
        if value.__class__ is str:
            chars += len(value)
        value = call.get("type")
        if value.__class__ is str:
            chars += len(value)
        fn = call.get("function")
        if fn.__class__ is dict:
            value = fn.get("name")
            if value.__class__ is str:
                chars += len(value)
            value = fn.get("arguments")
            if value.__class__ is str:
                chars += len(value)
    return chars


def estimate_message_tokens(msg: Message) -> int:
    """Heuristic tokens of one message: chars × 2 // 5, then + 256 per image/media part.

    Characters: content text, reasoning_content, each tool call's id + type + function name +
    arguments, tool_call_id, plus 12 per message. Written for speed (it runs on every message of
    every history): exact-type checks and no helper calls on the common path.
    """
    content = msg.get("content")
    media = 0
    if content.__class__ is str:
        chars = len(content)
    elif content is None:
        chars = 0
    else:
        chars = len(content_text(content))
        media = media_count(content)
    reasoning = msg.get("reasoning_content")
    if reasoning and reasoning.__class__ is str:
        chars += len(reasoning)
    calls = msg.get("tool_calls")
    if calls:
        chars += _calls_chars(calls)
    call_id = msg.get("tool_call_id")
    if call_id and call_id.__class__ is str:
        chars += len(call_id)
    return (chars + MESSAGE_OVERHEAD_CHARS) * 2 // 5 + MEDIA_TOKENS * media


def _tool_parts(tool: dict[str, Any]) -> tuple[str, str, Any]:
    found = tool.get("function")
    fn: dict[str, Any] = found if isinstance(found, dict) else tool
    return str(fn.get("name") or ""), str(fn.get("description") or ""), fn.get("parameters")


def _tool_chars(tool: dict[str, Any], depth: int = 0) -> int:
    """A tool definition's characters: name, description, parameters (a Responses ``custom`` tool's ``format``),
    and, for a Responses ``namespace`` (Codex's code mode), the tools it holds."""
    name, description, parameters = _tool_parts(tool)
    if parameters is None and tool.get("type") == "custom":
        parameters = tool.get("format")
    total = len(name) + len(description) + TOOL_DEF_OVERHEAD_CHARS
    if parameters is not None:
        total += len(json.dumps(parameters))
    nested = tool.get("tools") if tool.get("type") == "namespace" and depth < 8 else None
    for inner in nested if isinstance(nested, list) else []:
        total += _tool_chars(inner, depth + 1) if isinstance(inner, dict) else 0
    return total


def estimate_tool_defs_tokens(tools: Sequence[dict[str, Any]] | None) -> int:
    """Σ(len(name) + len(description) + len(json.dumps(parameters)) + 20) × 2 // 5 (a namespace: with its tools)."""
    return sum(_tool_chars(tool) for tool in tools or ()) * 2 // 5


def estimate_text_tokens(text: str) -> int:
    """Heuristic tokens of a bare text (system prompt, summary, draft)."""
    return len(text) * 2 // 5


class Estimator(Protocol):
    """Counts tokens of messages, tool definitions and bare text."""

    name: str

    def message(self, msg: Message) -> int: ...

    def tools(self, tools: Sequence[dict[str, Any]] | None) -> int: ...

    def text(self, text: str) -> int: ...

    def framing(self) -> int:
        """Tokens every request adds besides its texts, messages and tools (a chat template's fixed
        parts); 0 where the message counts already hold them."""
        ...


class HeuristicEstimator:
    name = "heuristic"

    def framing(self) -> int:
        return 0

    def message(self, msg: Message) -> int:
        return estimate_message_tokens(msg)

    def tools(self, tools: Sequence[dict[str, Any]] | None) -> int:
        return estimate_tool_defs_tokens(tools)

    def text(self, text: str) -> int:
        return estimate_text_tokens(text)


class ExactEstimator:
    """The model's tokenizer through litellm.token_counter (lazily imported in engine.llm.client)."""

    name = "exact"

    def __init__(self, model: str) -> None:
        self.model = model
        from engine.llm import client as llm  # lazy: keeps litellm off the import path until asked for

        self._count_messages: Callable[[str, list[Message]], int] = llm.token_counter
        self._count_text: Callable[[str, str], int] = llm.text_token_counter
        self._count_tools: Callable[[str, Sequence[dict[str, Any]]], int] = llm.tools_token_counter

    def message(self, msg: Message) -> int:
        from engine.model.messages import to_wire

        tokens = self._count_messages(self.model, [to_wire(msg)])
        return tokens + MEDIA_TOKENS * media_count(msg.get("content"))

    def tools(self, tools: Sequence[dict[str, Any]] | None) -> int:
        return self._count_tools(self.model, list(tools or ())) if tools else 0

    def text(self, text: str) -> int:
        return self._count_text(self.model, text) if text else 0

    def framing(self) -> int:
        return 0


class LocalEstimator:
    """The bundled model's own count: llama.cpp's tokenizer on the ChatML text
    :func:`engine.llm.local_model.render_prompt` gives the model, so the figure before a call is the one
    llama.cpp reports after it. Regions add up to the prompt: each message is its own ChatML block,
    the tools are described inside the system block, and :meth:`framing` is the system block's
    markers plus the generation prompt."""

    name = "exact"

    def __init__(self, model: str) -> None:
        from engine.llm import local_model

        self.model = model
        self._lm = local_model
        self._framing: int | None = None

    def message(self, msg: Message) -> int:
        from engine.model.messages import to_wire

        return self._lm.count_text(self._lm.render_message(to_wire(msg)))

    def tools(self, tools: Sequence[dict[str, Any]] | None) -> int:
        return self._lm.count_tools(tools) if tools else 0

    def text(self, text: str) -> int:
        return self._lm.count_text(text) if text else 0

    def framing(self) -> int:
        if self._framing is None:
            self._framing = self._lm.count_framing()
        return self._framing


def make_estimator(kind: str, model: str = "") -> Estimator:
    """The estimator named ``kind`` (see the module docstring) for ``model``."""
    from engine.llm.local_model import LocalModelError, is_local, model_path

    if kind == "heuristic":
        return HeuristicEstimator()
    if kind in ("exact", "auto") and model and is_local(model):
        try:
            model_path()
            return LocalEstimator(model)
        except LocalModelError:  # the model's file is not installed: count without its tokenizer
            pass
    if kind == "exact":
        return ExactEstimator(model)
    if kind == "auto":
        return HeuristicEstimator()
    raise ValueError(f"unknown estimator {kind!r} (expected 'auto', 'heuristic' or 'exact')")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


_CALL = object()  # marks a tool call frozen flat (no JSON value is it: no other key equals one)


def _frozen_call(call: Any) -> Any:
    """A tool call of the usual shape (``id``, ``type``, ``function`` with ``name`` and ``arguments``) as one flat
    tuple: its four values (the sorted pairs of :func:`_freeze` were eight tuples a call, held by the ledger for every
    message of a session); any other shape as :func:`_freeze` makes it."""
    if type(call) is dict and len(call) == 3 and "id" in call and "type" in call:
        fn = call.get("function")
        if type(fn) is dict and len(fn) == 2 and "name" in fn and "arguments" in fn:
            return (_CALL, _freeze(call["id"]), _freeze(call["type"]), _freeze(fn["name"]), _freeze(fn["arguments"]))
    return _freeze(call)


def message_key(msg: Message) -> tuple[Any, ...]:
    """Everything in a message that can change its token count, as a hashable key.

    Strings are immutable and cache their hash, so building and hashing this key costs
    O(number of fields), not O(characters).
    """
    content = msg.get("content")
    calls = msg.get("tool_calls")
    return (
        msg.get("role"),
        content if isinstance(content, str | None) else _freeze(content),
        msg.get("reasoning_content"),
        (tuple(_frozen_call(c) for c in calls) if isinstance(calls, list) else _freeze(calls)) if calls else None,
        msg.get("tool_call_id"),
    )


FOLLOW_MEMO = 256  # the message shapes a followed view's recorder keeps counted (engine.ingest.LiveImport): it counts
# each new message once, a grown response again; the import's memo of every message's shape is not kept


class TokenCache:
    """Memo of per-message token counts for one estimator, keyed by :func:`message_key`."""

    def __init__(self, estimator: Estimator, max_entries: int = 200_000) -> None:
        self.estimator = estimator
        self.max_entries = max_entries
        self._memo: dict[tuple[Any, ...], int] = {}
        self.hits = 0
        self.misses = 0

    def count(self, msg: Message, key: tuple[Any, ...] | None = None) -> int:
        """``msg``'s tokens; ``key``: its :func:`message_key` when the caller made it already (one key a message,
        not two equal ones held apart)."""
        key = message_key(msg) if key is None else key
        tokens = self._memo.get(key)
        if tokens is not None:
            self.hits += 1
            return tokens
        self.misses += 1
        tokens = self.estimator.message(msg)
        if len(self._memo) >= self.max_entries:
            self._memo.clear()
        self._memo[key] = tokens
        return tokens

    def total(self, messages: Iterable[Message]) -> int:
        return sum(self.count(m) for m in messages)

    def clear(self) -> None:
        self._memo.clear()

    def bound(self, entries: int) -> None:
        """From now on keep at most ``entries`` counts (the memo emptied now, and whenever it fills)."""
        self._memo.clear()
        self.max_entries = entries

    def forget(self, key: tuple[Any, ...]) -> None:
        """Drop ``key``'s count (a message that changed: its old shape is not asked again; an equal message is
        counted again if it ever is)."""
        self._memo.pop(key, None)


class TokenLedger:
    """Per-message token counts and their running total for one history list.

    Edits made through the ledger (``append``, ``extend``, ``replace``, ``delete``, ``reset``) cost
    O(messages touched). :meth:`sync` reconciles with a list edited elsewhere: it compares by
    identity and key, and re-estimates only messages that changed (by identity only once :meth:`follow` made it
    keep no keys).
    """

    def __init__(self, cache: TokenCache, messages: Iterable[Message] = ()) -> None:
        self.cache = cache
        self._msgs: list[Message] = []
        self._keys: list[tuple[Any, ...]] | None = []  # each message's key (None: none kept, see follow)
        self.counts: list[int] = []
        self.total = 0
        self.revision = 0  # bumped by every edit but an append: running tallies start again then
        self.extend(messages)

    def __len__(self) -> int:
        return len(self.counts)

    def follow(self, memo: int) -> None:
        """The ledger of a followed view (read-only: a message that changes comes as a new dict, never changed in
        place): no message's key kept from now on, and at most ``memo`` shapes counted in the memo (a key a message
        and a memo entry each were held for as long as the file grew; the import counted them all once). A replaced
        message's old key is made again from the message it replaces; :meth:`sync` compares by identity."""
        self._keys = None
        self.cache.bound(memo)

    def append(self, msg: Message) -> int:
        key = message_key(msg)  # the memo's key and this list's: one object (each a copy of the message's shape)
        tokens = self.cache.count(msg, key)
        self._msgs.append(msg)
        if self._keys is not None:
            self._keys.append(key)
        self.counts.append(tokens)
        self.total += tokens
        return tokens

    def extend(self, messages: Iterable[Message]) -> None:
        for msg in messages:
            self.append(msg)

    def replace(self, index: int, msg: Message) -> None:
        self.revision += 1
        key = message_key(msg)
        old = self._keys[index] if self._keys is not None else message_key(self._msgs[index])
        if old != key:  # the memo forgets the replaced shape (a followed response grows line by line: each of its
            self.cache.forget(old)  # shapes held there for good, with the text they held)
        tokens = self.cache.count(msg, key)
        self.total += tokens - self.counts[index]
        self._msgs[index] = msg
        if self._keys is not None:
            self._keys[index] = key
        self.counts[index] = tokens

    def delete(self, start: int, stop: int | None = None) -> None:
        stop = len(self.counts) if stop is None else stop
        self.revision += 1
        self.total -= sum(self.counts[start:stop])
        del self._msgs[start:stop], self.counts[start:stop]
        if self._keys is not None:
            del self._keys[start:stop]

    def reset(self, messages: Iterable[Message]) -> None:
        self._msgs, self.counts, self.total = [], [], 0
        self._keys = [] if self._keys is not None else None
        self.revision += 1
        self.extend(messages)

    def sync(self, messages: Sequence[Message]) -> int:
        """Bring the ledger in line with ``messages`` (edited in any way); return the total."""
        n_old, n_new = len(self._msgs), len(messages)
        common = min(n_old, n_new)
        for i in range(common):
            msg = messages[i]
            if msg is not self._msgs[i] or (self._keys is not None and message_key(msg) != self._keys[i]):
                self.replace(i, msg)
        if n_new > n_old:
            self.extend(messages[n_old:])
        elif n_new < n_old:
            self.delete(n_new)
        return self.total

    def tokens_of(self, index: int) -> int:
        return self.counts[index]
