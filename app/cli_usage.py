"""``ctxbench usage [--by day|project|model|session|tool|agent|skill|subagent|mcp] [--since DATE] [--json]``: what
the agents spent.

Brings the usage index (:mod:`engine.usage.index`, ``<data dir>/usage``) up to date with the session files on
this machine (only new or changed files are read; ``--refresh`` reads all again, ``--no-update`` reads none),
then prints per group: calls, tokens (prompt, uncached input, cache read / write, output), the cost in USD
from litellm's price table, and the cache hit rate; per session also its peak fullness, compactions and the
agent's own cost where it recorded one (Claude Code's ``cost-state``) with the difference, and the cost's parts
(``main``, ``subagents``, ``compaction``: the session's own calls, its subagents' and its compactions' own calls,
as :class:`engine.usage.costs.SessionCost` makes them for the window's status bar; ``--json``: each an object with
``cost_usd``, ``calls``, ``unpriced_calls``, and ``cost_breakdown`` in words); per tool the tool
results' estimated tokens, its tool calls and their cost (each response's cost split evenly over the tool
calls it made, as ``ctxbench tools`` splits it: the tools' costs add up to the cost of the responses that
called one); per skill, subagent type and MCP server the calls the agent attributed to it (Claude Code 2.1.3xx:
the skill that was running, the subagent's type, the MCP server whose result the call answered; the calls it did not
attribute are the ``(none)`` group). A call of a model without a price is counted in
``unpriced_calls`` and never as $0: a cost shown with ``+`` is a lower bound.

``--json`` prints one object: ``type`` ``usage``, ``by``, ``since``, ``groups`` (one object per group),
``total``, ``index`` (what the update did: ``failed`` lists every session file that could not be read with
the reason, ``warnings`` what the figures are not) and ``notices`` (what the query found, e.g. a damaged
index file rebuilt). On stderr: the first five unreadable files (path and reason) and every warning. When
another process is updating the index, ``usage`` says so after a second and, after ``--lock-wait`` seconds,
answers from the index as it is; a read-only index answers as it is (a warning when files changed).
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from datetime import date
from typing import Any

from engine.model.text import printable

GROUP_CHOICES = ("day", "project", "model", "session", "tool", "agent", "skill", "subagent", "mcp")


def _date(text: str) -> date:
    m = re.fullmatch(r"(\d{4})-?(\d\d)-?(\d\d)", text.strip())
    try:
        if m is None:
            raise ValueError
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date as YYYY-MM-DD, got {text!r}") from None


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``usage`` sub-command to ``sub`` (the CLI's subparsers)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "usage", help="tokens and dollar cost of every agent call on this machine, per day, project, model, "
        "session or tool")
    p.add_argument("--by", choices=GROUP_CHOICES, default="day", help="group the figures by (default: day)")
    p.add_argument("--since", type=_date, metavar="DATE", help="only calls from this day on (YYYY-MM-DD, UTC)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--refresh", action="store_true", help="read every session file again")
    mode.add_argument("--no-update", action="store_true", help="query the index as it is (read no file)")
    p.add_argument("--lock-wait", type=float, default=15.0, metavar="SECONDS",  # engine.usage.storage.LOCK_WAIT
                   help="how long to wait for another ctxbench process updating the index before answering from "
                        "the index as it is (default: 15)")
    return p


def _int(value: Any) -> str:
    return "" if value is None else f"{int(value):,}"


def _usd(value: Any, unpriced: int = 0) -> str:
    if value is None:
        return "unknown" if unpriced else ""
    return f"${value:,.2f}" + ("+" if unpriced else "")


def _pct(value: Any) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def _label(row: dict[str, Any], by: str) -> str:
    """The group's name as printed: its names come from other agents' files, so control characters are escaped."""
    if by == "session":
        return (f"{printable(row.get('agent'))} {printable(row.get('project') or '?')} "
                f"{printable(str(row.get('session_id') or '')[:13])}")
    return printable(row.get(by)) if row.get(by) not in (None, "") else "(none)"


def format_table(groups: list[dict[str, Any]], total: dict[str, Any], by: str) -> str:
    """The figures as a plain-text table."""
    from engine.usage.costs import row_cost

    if by == "tool":
        head = ["tool", "calls", "results", "result tokens", "cost of calls"]
        rows = [[printable(g["tool"]), _int(g["calls"]), _int(g["results"]), _int(g["result_tokens"]),
                 _usd(g.get("cost_usd_of_calls"))] for g in groups]
    else:
        head = [by, "calls", "prompt", "input", "cache read", "cache write", "output", "hit rate", "cost"]
        if by == "session":
            head += ["main", "subagents", "compaction", "peak", "compactions", "agent cost", "difference"]
        rows = []
        for g in groups:
            row = [_label(g, by), _int(g["calls"]), _int(g["prompt_tokens"]), _int(g["input_tokens"]),
                   _int(g["cache_read_tokens"]), _int(g["cache_write_tokens"]), _int(g["output_tokens"]),
                   _pct(g.get("cache_hit_rate")), _usd(g.get("cost_usd"), g.get("unpriced_calls") or 0)]
            if by == "session":  # the cost's parts (engine.usage.costs.row_cost), as the window's status bar
                parts = row_cost(g)
                row += [_usd(p.usd, p.unpriced) if p.calls else "" for p in (parts.main, parts.subagents,
                                                                               parts.compaction)]
                row += [_pct(g.get("peak_fullness")), _int(g.get("compactions")), _usd(g.get("agent_cost_usd")),
                        _usd(g.get("difference_usd"))]
            rows.append(row)
        if total:
            tail = ["total", _int(total.get("calls")), _int(total.get("prompt_tokens")),
                    _int(total.get("input_tokens")), _int(total.get("cache_read_tokens")),
                    _int(total.get("cache_write_tokens")), _int(total.get("output_tokens")),
                    _pct(total.get("cache_hit_rate")), _usd(total.get("cost_usd"), total.get("unpriced_calls") or 0)]
            rows.append(tail + [""] * (len(head) - len(tail)))
    if not groups:
        return "No agent calls in the usage index."
    table = [head, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in table]
    unpriced = int(total.get("unpriced_calls") or 0) if total else 0
    if unpriced:
        lines.append(f"{unpriced} call(s) of a model without a price in litellm's table: their cost is not counted")
    return "\n".join(lines)


def _answer(index: Any, args: argparse.Namespace,
            error: type[Exception]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The groups and the total asked for: the answer kept for the index as it is now when the same was asked before
    (:mod:`engine.usage.answers`: no DuckDB started), else the index's query (then kept)."""
    from engine.sources.model import shown_path
    from engine.usage import answers
    from engine.usage.storage import UsageIndexError

    token = index.manifest(whole=False).token
    key = answers.question("usage", args.by, args.since)
    kept = answers.recall(index.root, token, key)
    if isinstance(kept, dict) and isinstance(kept.get("groups"), list) and isinstance(kept.get("total"), dict):
        return kept["groups"], kept["total"]
    notices = len(index.notices)
    try:
        groups = index.query(args.by, args.since)
        total = index.totals(args.since)
    except UsageIndexError as exc:  # names the index and what was wrong
        raise error(str(exc)) from None
    except (OSError, ValueError, _duckdb_error()) as exc:  # unreadable, or DuckDB failed: say where, try --refresh
        raise error(f"cannot query the usage index in {shown_path(index.root)} ({type(exc).__name__}: "
                    f"{printable(exc)}); try --refresh") from None
    if args.by == "session":
        from engine.usage.costs import row_cost
        from engine.usage.prices import compare_agent_cost

        for g in groups:
            g.update(compare_agent_cost(g.get("cost_usd"), g.get("agent_cost_usd")))
            parts = row_cost(g)  # main + subagents + compaction calls, each with its calls and those unpriced
            g.update(main=parts.main.to_json(), subagents=parts.subagents.to_json(),
                     compaction=parts.compaction.to_json(), cost_breakdown=parts.breakdown())
    if len(index.notices) == notices:  # (a query that rebuilt a damaged file made a new index: not kept)
        answer = answers.as_json({"groups": groups, "total": total})
        answers.keep(index.root, token, key, answer)
        return answer["groups"], answer["total"]
    return groups, total


def _duckdb_error() -> type[Exception]:
    """DuckDB's errors' base class (an ``except`` evaluates it only when something was raised: DuckDB is loaded by
    then, never imported for it)."""
    import duckdb

    return duckdb.Error


class ProgressLine:
    """How far an update's reading has come (:meth:`engine.usage.index.IndexProgress.said`), on ``stream`` when it
    is a terminal: one line written over, once the update has run :data:`SHOW_AFTER` seconds (a quick update shows
    nothing), wiped by :meth:`close`. Nothing on a pipe or a log. Told from the update's thread or its worker
    pool's."""

    SHOW_AFTER = 1.0

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.on = bool(getattr(stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.width = 0  # of the line shown
        self.lock = threading.Lock()

    def __call__(self, progress: Any) -> None:
        if not self.on or time.monotonic() - self.started < self.SHOW_AFTER:
            return
        text = f"ctxbench: {progress.said()}"
        with self.lock:
            if not self.on:  # (closed meanwhile: a worker's last file told late writes nothing)
                return
            self.stream.write("\r" + text.ljust(self.width))
            self.stream.flush()
            self.width = len(text)

    def close(self) -> None:
        """Wipe the line; nothing is written after."""
        with self.lock:
            self.on = False
            if self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
                self.width = 0


def cmd_usage(args: argparse.Namespace, settings: Any, out: Any, error: type[Exception]) -> int:
    """Run the command; ``out`` prints one JSON object (app.cli.Printer); problems raise ``error``."""
    from engine.sources.model import shown_path
    from engine.usage.index import UsageIndex
    from engine.usage.storage import UsageIndexError

    def warn(text: str) -> None:
        print(f"ctxbench: warning: {printable(text)}", file=sys.stderr, flush=True)

    def say(text: str) -> None:  # the wait for another process's update
        print(f"ctxbench: {printable(text)}", file=sys.stderr, flush=True)

    index = UsageIndex(one_shot=True)  # (its readers are not kept: the process ends after this update)
    report = None
    if not args.no_update:
        shown = ProgressLine(sys.stderr)
        try:
            report = index.update(settings, refresh=args.refresh, say=say, lock_wait=args.lock_wait, progress=shown)
        except (OSError, UsageIndexError) as exc:
            raise error(str(exc) if isinstance(exc, UsageIndexError)
                        else f"cannot update the usage index in {shown_path(index.root)}: {exc}") from None
        finally:
            shown.close()
        for path, reason in report.failed[:5]:
            warn(f"{path}: {reason}")
        if len(report.failed) > 5:
            warn(f"{len(report.failed) - 5} more session files could not be read (--json lists them all)")
        for path, lines, first in report.damaged[:5]:
            warn(f"{path}: {lines:,} line(s) could not be read ({first}); the rest of the file is counted")
        if len(report.damaged) > 5:
            warn(f"{len(report.damaged) - 5} more session files were read in part (--json lists them all)")
        for text in report.warnings:
            warn(text)
        if report.bad_values:
            warn(f"{report.bad_values} row(s) with a number out of range: the number left empty")
    else:
        manifest = index.manifest(whole=False)
        if not manifest.valid and manifest.problem:  # another version's or a damaged index: not read, said
            warn(f"{manifest.problem}; run ctxbench usage without --no-update to build it")
    notices = len(index.notices)
    groups, total = _answer(index, args, error)
    for text in index.notices[notices:]:  # a damaged index file rebuilt
        warn(text)
    if args.json:
        out({"type": "usage", "by": args.by, "since": args.since.isoformat() if args.since else None,
             "groups": groups, "total": total, "index": report.to_json() if report else None,
             "notices": index.notices[notices:]})
        return 0
    try:
        sys.stdout.write(format_table(groups, total, args.by) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0
