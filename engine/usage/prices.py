"""Dollar cost of one provider call, from the call's own figures and litellm's price table read offline.

The table is the ``model_prices_and_context_window_backup.json`` that ships inside the installed litellm
package (the file litellm itself uses with ``LITELLM_LOCAL_MODEL_COST_MAP=True``). It is read as JSON,
never by importing litellm (which takes seconds); its place comes from ``importlib.util.find_spec``.

A call costs (each rate per token, from the model's entry):

- uncached input = prompt − cache read − cache write, at ``input_cost_per_token``;
- cache reads at ``cache_read_input_token_cost`` (the input price where the table has none);
- cache writes at ``cache_creation_input_token_cost``; the part written for one hour (Claude Code's
  ``ephemeral_1h_input_tokens``, passed as ``cache_write_1h_tokens``) at
  ``cache_creation_input_token_cost_above_1hr`` where the table has it;
- output at ``output_cost_per_token``; reasoning at ``output_cost_per_reasoning_token`` where the table
  has it, else at the output price. Whether the output figure already holds the reasoning depends on the
  agent (OpenAI and Anthropic count thinking in the output; Gemini CLI's ``thoughts`` and OpenCode's
  ``reasoning`` come on top): :data:`REASONING_SEPARATE`;
- long-context tiers: when the prompt is above a threshold the entry names (``*_above_200k_tokens``,
  ``*_above_272k_tokens``, …), every rate of that tier replaces the base rate (litellm's own rule).
- server-side work billed beside the call's top-level usage (Anthropic's ``usage.iterations`` of a type other
  than ``message``: a server-side compaction, an advisor; :mod:`engine.model.call_meta`): each such iteration
  priced as a call of its own (its own tier; the call's model unless it names one) and added, once
  (:meth:`PriceTable.add_beside`); the top-level figures are never counted again.

A model the table does not know costs ``None`` with the reason, never $0. Names are taken as the agents
write them: exact first, then without a provider prefix (``anthropic/``, ``models/``, ``openrouter/x/``),
a ``[1m]`` or ``@version`` suffix, a Bedrock ``anthropic.`` / ``-v1:0`` wrapping, or a date suffix
(``-20250929``); then with the usual provider prefixes added. No fuzzy matching: a near name could
carry another model's price.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.sources import formats
from engine.sources.model import ProviderCall

PRICE_FILE = "model_prices_and_context_window_backup.json"
REASONING_SEPARATE = frozenset(formats.names(reasoning_in_output=False))  # reasoning not in the output figure
PREFIXES = ("anthropic/", "openai/", "gemini/", "vertex_ai/", "xai/", "deepseek/", "mistral/")

_TIER_RE = re.compile(r"^input_cost_per_token_above_(\d+)k_tokens$")
_DATE_RE = re.compile(r"-(?:\d{8}|\d{4}-\d\d-\d\d)$")
_BEDROCK_RE = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.")
_VERSION_RE = re.compile(r"-v\d+(?::\d+)?$")


class PriceTableError(RuntimeError):
    """The price table cannot be found or read."""


@lru_cache(maxsize=1)
def price_table_path() -> Path | None:
    """Where litellm's bundled price table is, without importing litellm; None when it is not installed
    (looked up once per process: a session's thousands of calls are priced with one look-up)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    for folder in folders:
        path = Path(folder) / PRICE_FILE
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=1)
def litellm_version() -> str:
    """The installed litellm's version (its price table's), read once per process: from the name of its one
    ``litellm-<version>.dist-info`` folder beside the package (a directory listing), else from its metadata
    (``importlib.metadata``, slower to import than an up-to-date index takes to answer)."""
    path = price_table_path()
    if path is not None:
        try:
            found = [entry.name for entry in os.scandir(path.parent.parent)
                     if entry.name.startswith("litellm-") and entry.name.endswith(".dist-info")]
        except OSError:
            found = []
        if len(found) == 1:
            return found[0][len("litellm-"):-len(".dist-info")]
    try:
        from importlib.metadata import version

        return version("litellm")
    except ImportError:  # (importlib.metadata's PackageNotFoundError is one)
        return "unknown"


@dataclass
class CallCost:
    """What one call cost in USD, and how it was worked out. ``usd`` is None when it cannot be known
    (``problem`` says why)."""

    usd: float | None
    price_key: str = ""  # the price table's entry used
    problem: str = ""
    input_usd: float = 0.0
    cache_read_usd: float = 0.0
    cache_write_usd: float = 0.0
    output_usd: float = 0.0
    reasoning_usd: float = 0.0
    tier: int = 0  # the long-context tier applied (its threshold in tokens), 0 for the base rates
    notes: list[str] = field(default_factory=list)

    @property
    def prompt_usd(self) -> float | None:
        """The input side of the call: uncached input + cache reads + cache writes (None when unknown)."""
        return None if self.usd is None else self.input_usd + self.cache_read_usd + self.cache_write_usd

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0


# the prices per token :meth:`PriceTable.cost` reads, in the order :meth:`PriceTable._rates` gives them
_RATE_KEYS = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
              "cache_creation_input_token_cost", "cache_creation_input_token_cost_above_1hr",
              "output_cost_per_reasoning_token")


def _rate(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class PriceTable:
    """litellm's model price table: name lookup and per-call cost."""

    def __init__(self, entries: dict[str, Any], source: str = "") -> None:
        self.entries = {k: v for k, v in entries.items() if isinstance(v, dict) and k != "sample_spec"}
        self.source = source
        self._lower = {k.lower(): k for k in self.entries}
        self._found: dict[str, str | None] = {}
        self._tier_cache: dict[str, tuple[int, ...]] = {}
        self._rate_cache: dict[tuple[str, int], tuple[float | None, ...]] = {}

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        path = path or price_table_path()
        if path is None:
            raise PriceTableError("litellm is not installed: its price table is not there")
        try:
            data = json.loads(Path(path).read_bytes())
        except (OSError, ValueError) as exc:
            raise PriceTableError(f"cannot read the price table {path}: {exc}") from None
        if not isinstance(data, dict):
            raise PriceTableError(f"the price table {path} is not a JSON object")
        return cls(data, str(path))

    # ------------------------------------------------------------------ names

    def _priced(self, name: str) -> str | None:
        key = self._lower.get(name.lower())
        if key is None:
            return None
        entry = self.entries[key]
        if _rate(entry.get("input_cost_per_token")) is None or _rate(entry.get("output_cost_per_token")) is None:
            return None
        return key

    @staticmethod
    def candidates(model: str) -> list[str]:
        """The names tried for ``model``, in order."""
        name = model.strip()
        bases = [name]
        bare = re.sub(r"\[[^\]]*\]$", "", name).split("@")[0]  # claude-opus-4-6[1m], vertex claude-x@2025…
        bases.append(bare)
        parts = bare.split("/")
        bases += ["/".join(parts[i:]) for i in range(1, len(parts))]
        last = parts[-1]
        if _BEDROCK_RE.match(last):
            bases.append(_VERSION_RE.sub("", _BEDROCK_RE.sub("", last)))
        bases += [_DATE_RE.sub("", b) for b in list(bases)]
        out: list[str] = []
        for b in bases:
            for cand in (b, *(p + b for p in PREFIXES if "/" not in b)):
                if cand and cand not in out:
                    out.append(cand)
        return out

    def lookup(self, model: str) -> str | None:
        """The table's entry for ``model`` (a name that has input and output prices), or None."""
        if model in self._found:
            return self._found[model]
        found = next((k for c in self.candidates(model) if (k := self._priced(c))), None) if model.strip() else None
        self._found[model] = found
        return found

    # ------------------------------------------------------------------ cost

    def _tiers(self, key: str) -> tuple[int, ...]:
        """The prompt sizes (tokens) above which entry ``key`` has prices of their own (``…_above_200k_tokens``)."""
        found = self._tier_cache.get(key)
        if found is None:
            found = self._tier_cache[key] = tuple(int(m.group(1)) * 1000 for k in self.entries[key]
                                                  if (m := _TIER_RE.match(k)))
        return found

    def _rates(self, key: str, tier: int) -> tuple[float | None, ...]:
        """Entry ``key``'s prices per token at prompt tier ``tier`` (its ``…_above_<tier>k_tokens`` price where it has
        one), in the order of :data:`_RATE_KEYS`; None where the table has no such price. Found once per entry and
        tier (every call of a model asks the same)."""
        found = self._rate_cache.get((key, tier))
        if found is None:
            entry = self.entries[key]

            def rate(base: str) -> float | None:
                if tier:
                    tiered = _rate(entry.get(f"{base}_above_{tier // 1000}k_tokens"))
                    if tiered is not None:
                        return tiered
                return _rate(entry.get(base))

            found = self._rate_cache[(key, tier)] = tuple(rate(base) for base in _RATE_KEYS)
        return found

    def call_cost(self, call: ProviderCall, *, cache_write_1h_tokens: int | None = None,
                  reasoning_in_output: bool = True) -> CallCost:
        """The cost of ``call`` (see the module's doc), its iterations billed beside the top-level usage included."""
        result = self.cost(call.model, prompt=call.prompt_tokens, completion=call.completion_tokens,
                           cache_read=call.cache_read_tokens, cache_write=call.cache_write_tokens,
                           reasoning=call.reasoning_tokens, cache_write_1h=cache_write_1h_tokens,
                           reasoning_in_output=reasoning_in_output)
        beside = call.billed_beside()
        return self.add_beside(result, call.model, [it.to_json() for it in beside]) if beside else result

    def add_beside(self, result: CallCost, model: str, beside: Iterable[Mapping[str, Any]]) -> CallCost:
        """``result`` with the iterations billed beside the top-level usage added (``beside``: as a ``context``
        record's ``billed_beside`` holds them, :meth:`engine.model.call_meta.UsageIteration.to_json`); a call
        whose own cost is unknown stays unknown; an iteration without a price makes the cost unknown too."""
        if result.usd is None:
            return result
        for it in beside:
            read, write = _count(it.get("cache_read_tokens")), _count(it.get("cache_write_tokens"))
            inp, out = _count(it.get("input_tokens")), _count(it.get("output_tokens"))
            part = self.cost(str(it.get("model") or model), prompt=inp + read + write, completion=out,
                             cache_read=read, cache_write=write)
            if part.usd is None:
                return CallCost(None, result.price_key, f"{it.get('type')} iteration: {part.problem}")
            result.input_usd += part.input_usd
            result.cache_read_usd += part.cache_read_usd
            result.cache_write_usd += part.cache_write_usd
            result.output_usd += part.output_usd
            result.usd += part.usd
            result.notes.append(f"{it.get('type')} iteration billed beside the call: {inp + read + write:,} in, "
                                f"{out:,} out")
        return result

    def cost(self, model: str, *, prompt: int | None, completion: int | None, cache_read: int | None = None,
             cache_write: int | None = None, reasoning: int | None = None, cache_write_1h: int | None = None,
             reasoning_in_output: bool = True) -> CallCost:
        if prompt is None and completion is None:
            return CallCost(None, problem="the agent recorded no usage for this call")
        key = self.lookup(model)
        if key is None:
            shown = model or "(no model name)"
            return CallCost(None, problem=f"no price for {shown!r} in litellm's price table ({litellm_version()})")
        prompt, completion = prompt or 0, completion or 0
        read, write = cache_read or 0, cache_write or 0
        write_1h = min(max(cache_write_1h or 0, 0), write)
        result = CallCost(None, price_key=key)
        tier = max((t for t in self._tiers(key) if prompt > t), default=0)
        result.tier = tier
        price_in, price_out, price_read, price_write, price_write_1h, price_reason = self._rates(key, tier)
        price_in, price_out = price_in or 0.0, price_out or 0.0
        if price_read is None and read:
            price_read = price_in
            result.notes.append("cache reads at the input price (the table has no cache-read price)")
        if price_write is None and write:
            price_write = price_in
            result.notes.append("cache writes at the input price (the table has no cache-write price)")
        if price_write_1h is None and write_1h:
            price_write_1h = price_write
            result.notes.append("1-hour cache writes at the 5-minute price (the table has no 1-hour price)")
        price_reason = price_out if price_reason is None else price_reason

        uncached = prompt - read - write
        if uncached < 0:
            result.notes.append(f"cache read + write exceed the prompt by {-uncached}: no uncached input counted")
            uncached = 0
        result.input_usd = uncached * price_in
        result.cache_read_usd = read * (price_read or 0.0)
        result.cache_write_usd = (write - write_1h) * (price_write or 0.0) + write_1h * (price_write_1h or 0.0)
        reasoning = max(reasoning or 0, 0)
        if reasoning_in_output:
            reasoning = min(reasoning, completion)
            result.output_usd = (completion - reasoning) * price_out
        else:
            result.output_usd = completion * price_out
        result.reasoning_usd = reasoning * price_reason
        result.usd = (result.input_usd + result.cache_read_usd + result.cache_write_usd + result.output_usd
                      + result.reasoning_usd)
        return result


@lru_cache(maxsize=4)
def _cached_table(path: str) -> PriceTable:
    return PriceTable.load(Path(path))


def load_table(path: Path | None = None) -> PriceTable:
    """The price table (read once per process and path)."""
    path = path or price_table_path()
    if path is None:
        raise PriceTableError("litellm is not installed: its price table is not there")
    return _cached_table(str(path))


def compare_agent_cost(ours: float | None, agent: float | None) -> dict[str, float | None]:
    """Our cost next to the agent's own (Claude Code's ``cost-state``): both, and ours − the agent's."""
    diff = None if ours is None or agent is None else round(ours - agent, 10)
    rel = None if diff is None or not agent else round(diff / agent, 6)
    return {"cost_usd": ours, "agent_cost_usd": agent, "difference_usd": diff, "difference_ratio": rel}
