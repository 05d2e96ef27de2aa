"""Build ``resources/sample_session/``: the session the screenshot command opens.

Run once (it is committed):  ``.venv/bin/python resources/make_sample_session.py``

Everything in it is made by the real engine: the real :class:`engine.agent.Agent` loop runs five
turns against ``tests/fakeserver.py`` (a real OpenAI-compatible HTTP server on 127.0.0.1) whose
replies are scripted below, with the real built-in tools on a small project created in a temporary
workspace (an invoice sync service whose nightly run hit a rate limit). So the tool results are
real tool output, the big log is really offloaded to ``tool_results/``, every LLM call is recorded
in ``events.jsonl`` by the agent, and the manual compaction goes through
:meth:`engine.context.compaction.Compactor.preview` / ``apply``.

The provider-reported prompt tokens are counted on each request the server receives with the
gpt-4o-mini tokenizer (``engine.llm.client.token_counter``, tiktoken through litellm), i.e. what that
provider would bill for that exact request; the app's own numbers are its heuristic estimate,
calibrated call by call as in a live session.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine.agent import Agent  # noqa: E402
from engine.context.conversation import Session  # noqa: E402
from engine.llm import client as llm  # noqa: E402
from engine.model.events import Event  # noqa: E402
from engine.store.config import Settings  # noqa: E402
from engine.tools.registry import ToolBox  # noqa: E402
from tests import fakeserver as fs  # noqa: E402

OUT = REPO / "resources" / "sample_session"
MODEL = "openai/gpt-4o-mini"
WINDOW = 8_192
TITLE = "Nightly invoice sync crashed (rate limit)"

SETTINGS = Settings().replace(
    model=MODEL,
    context_window=WINDOW,
    max_tokens=1024,
    offload_recent_bytes=8_000,
    offload_old_bytes=2_000,
    auto_compact=False,
    reserve_ratio=0.1,
)

# --------------------------------------------------------------------------- the project

RETRY_PY = '''"""Retry helper used by the API client."""

import random
import time

from invoice_sync.errors import RateLimited, TransientError


def with_backoff(call, attempts=5, base_delay=0.5, max_delay=8.0):
    """Call ``call()``; on a transient error wait and try again (exponential backoff)."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (RateLimited, TransientError) as exc:
            if attempt == attempts:
                raise GiveUp(f"gave up after {attempts} attempts: {exc}") from exc
            delay = min(max_delay, base_delay * 2 ** (attempt - 1))
            time.sleep(delay + random.uniform(0, 0.1))


class GiveUp(RuntimeError):
    pass
'''

CLIENT_PY = '''"""Client for the billing API (GET /invoices?page=N)."""

import requests

from invoice_sync import config
from invoice_sync.errors import RateLimited, TransientError
from invoice_sync.retry import with_backoff


class BillingClient:
    def __init__(self, token, session=None):
        self.token = token
        self.http = session or requests.Session()

    def _get(self, path, **params):
        resp = self.http.get(config.API_URL + path, params=params,
                             headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        if resp.status_code == 429:
            raise RateLimited(resp.headers.get("Retry-After"))
        if resp.status_code >= 500:
            raise TransientError(resp.status_code)
        resp.raise_for_status()
        return resp.json()

    def fetch_invoices(self, page):
        return with_backoff(lambda: self._get("/invoices", page=page, size=config.PAGE_SIZE))
'''

CONFIG_PY = '''"""Settings of the nightly sync (overridable by environment variables)."""

import os

API_URL = os.environ.get("BILLING_API_URL", "https://billing.internal.example/api/v2")
PAGE_SIZE = int(os.environ.get("SYNC_PAGE_SIZE", "500"))
WORKERS = int(os.environ.get("SYNC_WORKERS", "16"))   # raised from 8 on 2025-11-18 (OPS-2291)
# the billing API allows 600 requests per minute per token (see README)
'''

ERRORS_PY = '''class TransientError(Exception):
    pass


class RateLimited(TransientError):
    def __init__(self, retry_after=None):
        super().__init__(f"429 Too Many Requests (Retry-After: {retry_after})")
        self.retry_after = retry_after
'''

README = """# invoice-sync

Copies yesterday's invoices from the billing API into the warehouse, every night at 02:00.

- `invoice_sync/client.py` — the API client (`GET /invoices?page=N&size=500`)
- `invoice_sync/retry.py` — exponential backoff for 429 and 5xx answers
- `invoice_sync/config.py` — page size, number of worker threads

## Limits of the billing API

600 requests per minute per token. Over the limit the API answers `429 Too Many Requests` with a
`Retry-After` header (seconds until the window resets, usually 20–60 s). Clients must honour it.
"""


def sync_log() -> str:
    lines = ["2025-11-20 02:00:00.112 INFO  sync start: 16 workers, page size 500, 248 pages expected"]
    t = 0.4
    page = 1
    # a calm start: ~16 pages per second
    while page <= 170:
        w = page % 16
        lines.append(f"2025-11-20 02:{int(t // 60):02d}:{t % 60:06.3f} INFO  worker-{w:02d} "
                     f"GET /invoices?page={page}&size=500 -> 200 (500 rows, {180 + page * 7 % 90} ms)")
        t += 0.063
        page += 1
    # the storm: 429s, retries 0.5 .. 8 s, all workers in step
    attempt_delays = [0.5, 1.0, 2.0, 4.0]
    for p in range(171, 213):
        w = p % 16
        for a, d in enumerate(attempt_delays, start=1):
            lines.append(f"2025-11-20 02:{int(t // 60):02d}:{t % 60:06.3f} WARN  worker-{w:02d} "
                         f"GET /invoices?page={p}&size=500 -> 429 Too Many Requests (Retry-After: 41)")
            lines.append(f"2025-11-20 02:{int(t // 60):02d}:{t % 60:06.3f} INFO  worker-{w:02d} "
                         f"retry {a}/5 of page {p} in {d:.1f} s")
            t += 0.09
        if p < 212:
            lines.append(f"2025-11-20 02:{int(t // 60):02d}:{t % 60:06.3f} INFO  worker-{w:02d} "
                         f"GET /invoices?page={p}&size=500 -> 200 (500 rows, 311 ms)")
    lines.append(f"2025-11-20 02:{int(t // 60):02d}:{t % 60:06.3f} WARN  worker-04 "
                 "GET /invoices?page=212&size=500 -> 429 Too Many Requests (Retry-After: 38)")
    lines.append(f"2025-11-20 02:{int(t // 60):02d}:{t % 60:06.3f} ERROR worker-04 "
                 "GiveUp: gave up after 5 attempts: 429 Too Many Requests (Retry-After: 38)")
    lines.append(f"2025-11-20 02:{int(t // 60):02d}:{t % 60:06.3f} ERROR sync aborted: 211 of 248 pages "
                 "copied; warehouse left at the state of 2025-11-19")
    return "\n".join(lines) + "\n"


def make_workspace(root: Path) -> None:
    pkg = root / "invoice_sync"
    pkg.mkdir(parents=True)
    (root / "logs").mkdir()
    (root / "README.md").write_text(README)
    (pkg / "__init__.py").write_text("")
    (pkg / "retry.py").write_text(RETRY_PY)
    (pkg / "client.py").write_text(CLIENT_PY)
    (pkg / "config.py").write_text(CONFIG_PY)
    (pkg / "errors.py").write_text(ERRORS_PY)
    (root / "logs" / "sync-2025-11-19.log").write_text(
        "2025-11-19 02:00:00.097 INFO  sync start: 8 workers, page size 500, 239 pages expected\n"
        "2025-11-19 02:00:31.512 INFO  sync done: 239 pages, 119,412 invoices\n"
    )
    (root / "logs" / "sync-2025-11-20.log").write_text(sync_log())


# --------------------------------------------------------------------------- the conversation

SUMMARY = """## Goal
Find out why the nightly invoice sync of 2025-11-20 crashed, and propose a fix (no files changed yet).

## Constraints & Preferences
- Read-only investigation: the user asked not to write anything yet.
- Keep exact file paths and numbers.

## Progress
### Done
- Read `logs/sync-2025-11-20.log` (offloaded, 550 lines): pages 1–170 fine, then `429 Too Many Requests`
  from page 171 on; `GiveUp: gave up after 5 attempts` on page 212 at 02:00:19; 211 of 248 pages copied.
- Read `invoice_sync/retry.py`, `invoice_sync/client.py`, `invoice_sync/config.py`.
### In Progress
- A fix proposal.
### Blocked
- none

## Key Decisions
- Root cause: `with_backoff()` in `invoice_sync/retry.py` ignores `Retry-After` (41 s) and gives up after
  0.5 + 1 + 2 + 4 = 7.5 s of waiting; `WORKERS` was raised from 8 to 16 on 2025-11-18 (OPS-2291), so the
  sync now exceeds the API limit of 600 requests/minute.

## Next Steps
1. Honour `RateLimited.retry_after` in `with_backoff()`.
2. Add a shared rate limiter (≤ 10 requests/s) across the workers.

## Critical Context
- `client.py` raises `RateLimited(resp.headers.get("Retry-After"))` — the value is available but unused.
- The previous night (8 workers) finished in 31 s without a single 429."""

ANSWER_1 = """The sync died on a **rate limit**, not on bad data:

- Pages 1–170 went fine at about 16 pages/s.
- From page 171 on (02:00:11) every worker got `429 Too Many Requests` with `Retry-After: 41`.
- Each page was retried after 0.5, 1, 2 and 4 s — far shorter than the 41 s the API asked for — so the
  retries hit the limit again.
- At 02:00:19 `worker-04` raised `GiveUp: gave up after 5 attempts` on page 212 and the sync aborted with
  **211 of 248 pages** copied; the warehouse still holds the state of 2025-11-19.

The night before (`logs/sync-2025-11-19.log`) ran with 8 workers and finished in 31 s."""

ANSWER_2 = """Because the backoff never waits long enough, and the sync now sends twice as many requests:

1. `invoice_sync/retry.py` — `with_backoff()` sleeps `min(8.0, 0.5 * 2 ** (attempt - 1))`: 0.5, 1, 2, 4 s,
   i.e. **7.5 s in total** before giving up. The API asked for 41 s (`Retry-After`).
2. `invoice_sync/client.py` already reads the header — `RateLimited(resp.headers.get("Retry-After"))` —
   but `with_backoff()` never looks at `exc.retry_after`.
3. `invoice_sync/config.py` — `WORKERS` went from 8 to **16** on 2025-11-18 (OPS-2291). 16 workers at
   ~200 ms per page is ~4,800 requests/minute at full speed, against a limit of 600.

So all 16 workers hit the limit at once, retry in lock-step, and run out of attempts."""

ANSWER_3 = """A fix in two parts (nothing written yet, as you asked):

**1. Honour `Retry-After`** in `invoice_sync/retry.py`:

```python
        except (RateLimited, TransientError) as exc:
            if attempt == attempts:
                raise GiveUp(f"gave up after {attempts} attempts: {exc}") from exc
            delay = min(max_delay, base_delay * 2 ** (attempt - 1))
            retry_after = getattr(exc, "retry_after", None)
            if retry_after is not None:
                delay = max(delay, float(retry_after))
            time.sleep(delay + random.uniform(0, 0.1 * delay))
```

**2. Stay under the limit** — one token bucket shared by the workers (10 requests/s = 600/min), taken in
`BillingClient._get()` before each request.

The README already says clients *must* honour `Retry-After`; part 1 alone would have saved last night's
run (41 s wait, then the window resets)."""

ANSWER_4 = """At the peak the sync sent about **950 requests per minute**:

- 02:00:00–02:00:10.7: 170 successful pages in 10.7 s → ~16 requests/s ≈ **950/min**.
- The limit is **600/min** per token, so the window was used up after ~38 s worth of quota in the
  first 11 s; from page 171 on, every request was refused.
- With 8 workers (the night before) the rate was about half of that, which is why 2025-11-19 passed.

With the shared limiter at 10 requests/s the 248 pages take ~25 s — still well under a minute."""

ANSWER_5 = """**OPS ticket — nightly invoice sync aborted on 2025-11-20 (rate limit)**

- [ ] `invoice_sync/retry.py`: use `exc.retry_after` (seconds) as the minimum delay; jitter ±10%.
- [ ] `invoice_sync/client.py`: shared token bucket, 10 requests/s across all workers.
- [ ] `invoice_sync/config.py`: keep `WORKERS = 16` only with the limiter; document the 600/min limit.
- [ ] Test: fake API answering 429 + `Retry-After: 2` — the sync must finish, not raise `GiveUp`.
- [ ] Re-run the sync for 2025-11-20 (pages 212–248 are missing in the warehouse).
- [ ] Alert when a sync ends with fewer pages than expected."""


async def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ctxbench-sample-"))
    workspace = tmp / "invoice-sync"
    make_workspace(workspace)
    if OUT.exists():
        shutil.rmtree(OUT)

    def usage(resp: dict[str, Any], body: dict[str, Any]) -> dict[str, int] | None:
        """What gpt-4o-mini's tokenizer counts for the request the server received."""
        prompt = llm.token_counter(MODEL, body.get("messages") or [])
        if body.get("tools"):
            prompt += llm.tools_token_counter(MODEL, body["tools"])
        out = "".join(str(ev.get("text") or "") + str((ev.get("tool_call") or {}).get("arguments") or "")
                      for ev in resp.get("events") or [])
        completion = max(1, llm.text_token_counter(MODEL, out))
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    fs._usage = usage  # the scripted server reports real token counts
    events: list[Event] = []
    with fs.FakeLLMServer() as server:
        session = Session.create(OUT, TITLE)
        config = llm.LLMConfig(model=MODEL, api_base=server.base_url, api_key="sk-sample", max_tokens=1024)
        toolbox = ToolBox(workspace, OUT)
        agent = Agent(session, SETTINGS, llm_config=config, toolbox=toolbox, emit=events.append)

        def reply(text: str) -> dict[str, Any]:
            return fs.text_reply(text, chunks=12)

        def call(name: str, args: dict[str, Any], cid: str, preface: str | None = None) -> dict[str, Any]:
            return fs.tool_call_reply(name, args, call_id=cid, preface=preface)

        log = "logs/sync-2025-11-20.log"
        server.queue(
            call("list_dir", {"path": "logs"}, "call_ls1", "Let me look at the logs first."),
            call("read_file", {"path": log}, "call_rd1"),
            call("search_text", {"pattern": "GiveUp|ERROR", "path": log}, "call_sr1",
                 "The log is long; let me find the errors."),
            reply(ANSWER_1),
        )
        await agent.run_turn("The nightly invoice sync crashed last night. Can you find out why? "
                             "The logs are in logs/.")
        offloaded = next(m["offload"]["path"] for m in session.messages if m.get("offload"))

        server.queue(
            call("read_file", {"path": "invoice_sync/retry.py"}, "call_rd2"),
            call("read_file", {"path": "invoice_sync/client.py"}, "call_rd3"),
            call("read_file", {"path": "invoice_sync/config.py"}, "call_rd4"),
            reply(ANSWER_2),
        )
        await agent.run_turn("Why didn't the retries help? We have backoff in there.")

        server.queue(fs.text_reply(SUMMARY, chunks=12, when={"tools": False}))
        preview = await agent.compactor.preview("keep the exact file paths and the numbers")
        await agent.compactor.apply(preview)

        server.queue(
            call("search_text", {"pattern": "Retry-After|retry_after", "path": "."}, "call_sr2"),
            call("read_file", {"path": "README.md"}, "call_rd5"),
            reply(ANSWER_3),
        )
        await agent.run_turn("What would you change? Don't write anything yet, just propose the fix.")

        server.queue(
            call("read_file", {"path": offloaded, "start_line": 160, "max_lines": 20}, "call_rd6",
                 "The full log was offloaded; reading the lines around the first 429."),
            call("search_text", {"pattern": "sync start|page=170&", "path": log}, "call_sr3"),
            reply(ANSWER_4),
        )
        await agent.run_turn("How many requests per minute did we send at the peak, according to the log?")

        server.queue(reply(ANSWER_5))
        await agent.run_turn("Thanks. Summarize the fix as a checklist for the ticket.")
        session.close()
    shutil.rmtree(tmp, ignore_errors=True)
    calls = sum(1 for e in events if e.type == "context")
    print(f"wrote {OUT.relative_to(REPO)}: {len(Session.load(OUT).messages)} messages, {calls} LLM calls")


if __name__ == "__main__":
    asyncio.run(main())
