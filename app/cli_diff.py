"""``ctxbench diff SESSION_OR_FILE A B [--json]``: what entered and left the context from call A to call B.

``SESSION_OR_FILE`` is a ctxbench session folder (its own or imported) or another agent's session
file (Claude Code, Codex, OpenHands, SWE-agent: read in place; mini-swe-agent and OpenAI-format logs:
imported into a temporary folder first). Calls are numbered from 1, as the timeline and ``ctxbench
export`` number them (``ctxbench follow``'s ``index`` is the number minus 1).

The text output lists the totals, the provider's prompt tokens of both calls and their difference,
then each item that entered and left (summary, message, tool result) with its tokens, role, tool,
position and first line (message ids of a file read in place are that read's own, as the readers
make them; a session folder's are stable). ``--json`` prints one object instead:
:meth:`engine.context.diff.ContextDiff.to_json` plus ``session`` and ``path``. Problems (no such
file, a call number out of range — the error gives the valid range) are one line on stderr, exit
status 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.context.diff import ContextDiff, DiffItem, History
from engine.model.text import printable
from engine.usage.costs import SessionCost


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``diff`` sub-command to ``sub`` (the CLI's subparsers)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "diff", help="what entered and what left the context between two provider calls, with tokens")
    p.add_argument("path", type=Path, metavar="SESSION_OR_FILE",
                   help="a ctxbench session folder or an agent's session file (Claude Code, Codex, ...)")
    p.add_argument("a", type=int, metavar="A", help="the first call (numbered from 1, as on the timeline)")
    p.add_argument("b", type=int, metavar="B", help="the second call")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _is_session_dir(path: Path) -> bool:
    return (path / "session.json").exists() or (path / "history.jsonl").exists()


def load_history(path: Path, error: type[Exception]) -> History:
    """The history of a session folder or of an agent's session file; problems raise ``error``."""
    return _load(path, error, with_calls=False)[0]


def load_session(path: Path, error: type[Exception]) -> tuple[History, list[dict[str, Any]], SessionCost | None]:
    """The history of a session folder or of an agent's session file, its calls' figures as ``context``
    records (one per call of the history, in order: what :mod:`engine.usage.costs` prices) and the session's
    cost (:class:`engine.usage.costs.SessionCost`: main + subagents + compaction calls), from one read of the
    file; problems raise ``error``."""
    return _load(path, error, with_calls=True)


def _load(path: Path, error: type[Exception], with_calls: bool
          ) -> tuple[History, list[dict[str, Any]], SessionCost | None]:
    from engine.context.diff import history_from_folder, history_from_source
    from engine.sources.detect import detect_format
    from engine.sources.model import SourceError
    from engine.sources.opencode import split_path
    from engine.sources.readers import READERS, read_source
    from engine.usage.costs import call_record, folder_cost, folder_records, source_cost

    if not split_path(path)[0].exists():  # an OpenCode session (``opencode.db#ses_…``): its database
        raise error(f"no session folder or file at {path}")
    if path.is_dir():
        if not _is_session_dir(path):
            raise error(f"{path} is not a session folder (no session.json or history.jsonl in it)")
        records = folder_records(path) if with_calls else []
        return history_from_folder(path), records, folder_cost(path, records=records) if with_calls else None
    try:
        fmt = detect_format(path)
        if fmt in READERS:
            src = read_source(path, fmt)
            calls = [call_record(c, src.format) for c in src.calls] if with_calls else []
            return history_from_source(src, label=path.name), calls, source_cost(src) if with_calls else None
        return _imported(path, error)
    except SourceError as exc:
        raise error(str(exc)) from None


def _imported(path: Path, error: type[Exception]) -> tuple[History, list[dict[str, Any]], SessionCost | None]:
    """A log that only the importer reads (mini-swe-agent, OpenAI format), imported into a temporary folder."""
    from engine.context.diff import history_from_folder
    from engine.ingest import import_source
    from engine.usage.costs import folder_cost, folder_records

    tmp = Path(tempfile.mkdtemp(prefix="ctxbench-diff-"))
    try:
        import_source(path, session_dir=tmp / "session", model_info=None)
        history = history_from_folder(tmp / "session")
        calls = folder_records(tmp / "session")
        cost = folder_cost(tmp / "session", records=calls)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    history.label = path.name
    return history, calls, cost


def _signed(n: int) -> str:
    return f"{n:+,}".replace("-", "−")


def _item_line(item: DiffItem, sign: str) -> str:
    where = "" if item.kind == "summary" else f"#{item.index + 1}"
    what = item.kind if item.kind == "summary" else printable(f"{item.role}{' ' + item.tool if item.tool else ''}")
    return f"  {sign}{item.tokens:>9,}  {what[:28]:28} {where:>6}  {printable(item.first_line)}"


def describe(diff: ContextDiff, label: str) -> list[str]:
    """The text output of one diff (the label, roles, tools and first lines with control characters escaped)."""
    comps = len(diff.compactions)
    lines = [f"{printable(label)}: call {diff.a} → call {diff.b}"
             + (f" ({comps} compaction{'s' if comps != 1 else ''} between them)" if comps else ""),
             f"entered {diff.entered_tokens:,} tokens ({len(diff.entered)} item(s)), left {diff.left_tokens:,} tokens "
             f"({len(diff.left)} item(s)), net {_signed(diff.net_tokens)} (estimated)",
             f"messages in the context: {diff.messages_a} → {diff.messages_b}"]
    if diff.prompt_delta is not None:
        lines.append(f"provider prompt tokens: {diff.prompt_a:,} → {diff.prompt_b:,} ({_signed(diff.prompt_delta)})")
    else:
        known = [f"call {n}: {p:,}" for n, p in ((diff.a, diff.prompt_a), (diff.b, diff.prompt_b)) if p is not None]
        lines.append("provider prompt tokens: " + ("; ".join(known) + "; " if known else "") + "not known for both")
    for title, items, sign in (("entered", diff.entered, "+"), ("left", diff.left, "−")):
        lines.append(f"{title.upper()}:" if items else f"{title.upper()}: nothing")
        lines.extend(_item_line(item, sign) for item in items)
    return lines


def cmd_diff(args: argparse.Namespace, out: Any, error: type[Exception]) -> int:
    """Run the command; ``out`` prints one JSON object (app.cli.Printer); problems raise ``error``."""
    from engine.context.diff import CallRangeError, diff_calls

    history = load_history(args.path, error)
    try:
        diff = diff_calls(history, args.a, args.b)
    except CallRangeError as exc:
        raise error(str(exc)) from None
    if args.json:
        data = diff.to_json()
        data.update(session=history.label, path=str(args.path))
        out(data)
        return 0
    write_lines(describe(diff, history.label))
    return 0


def write_lines(lines: list[str]) -> None:
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
