"""``ctxbench export --session DIR --format md|csv|json [-o FILE]``: a session as a file.

``md``: the conversation with per-message tokens (the settings' estimator; ``heuristic`` unless
``--estimator`` says otherwise, so no tokenizer is loaded); ``csv`` / ``json``: one row per provider
call of ``events.jsonl`` (see :mod:`engine.export`). Without ``-o`` the file is
``<session id>.md`` / ``<session id>-calls.csv`` / ``<session id>-calls.json`` in the current folder;
``-o -`` writes to stdout. On success one JSON line is printed: ``{"type": "export", "format",
"path", "bytes", "messages", "calls"}``. The session needs no lock: an open session can be exported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.model.text import printable
from engine.store.config import Settings


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``export`` sub-command to ``sub`` (the CLI's subparsers)."""
    from engine.export import EXPORT_FORMATS

    p: argparse.ArgumentParser = sub.add_parser(
        "export", help="write a session as Markdown (messages with tokens) or its provider calls as CSV / JSON")
    p.add_argument("--session", required=True, type=Path, metavar="DIR")
    p.add_argument("--format", required=True, choices=EXPORT_FORMATS, dest="export_format",
                   help="md: the conversation with per-message tokens; csv / json: one row per provider call")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="file to write ('-': stdout; default: named after the session, in the current folder)")
    p.add_argument("--estimator", choices=("heuristic", "auto", "exact"), default="heuristic",
                   help="how message tokens are counted for md (default: heuristic)")
    return p


def cmd_export(args: argparse.Namespace, settings: Settings, out: Any, error: type[Exception]) -> int:
    """Run the command; ``out`` prints one JSON object (app.cli.Printer); problems raise ``error``
    (app.cli.CLIError: one line on stderr, exit status 1)."""
    from engine.context.tokens import HeuristicEstimator, make_estimator
    from engine.export import ExportError, default_path, read_session, render, write_file

    try:
        data = read_session(args.session)
    except ExportError as exc:
        raise error(str(exc)) from None
    estimator = HeuristicEstimator() if args.estimator == "heuristic" else make_estimator(
        args.estimator, str(data.meta.get("model") or settings.model))
    text = render(data, args.export_format, estimator)
    if str(args.output) == "-":  # on a terminal, the session's control characters are shown, not acted on
        sys.stdout.write(printable(text, lines=True) if sys.stdout.isatty() else text)
        sys.stdout.flush()
        return 0
    target = args.output or default_path(args.session, args.export_format)
    if target.is_dir():
        target = default_path(args.session, args.export_format, target)
    try:
        write_file(target, text.encode("utf-8"))
    except OSError as exc:
        raise error(f"cannot write {target}: {exc.strerror or exc}") from None
    out({"type": "export", "format": args.export_format, "path": str(target),
         "bytes": len(text.encode("utf-8")), "messages": len(data.messages), "calls": len(data.calls)})
    return 0
