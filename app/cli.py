"""The ``ctxbench`` command: the desktop app, or the engine headless.

    ctxbench                         start the desktop app (app.main.run_gui)
    ctxbench run --session DIR [--model M] [--api-base URL] [--context-window N] [--max-tokens N]
                 [--workspace DIR] [--allow-write] [--allow-shell] [--yes] PROMPT
    ctxbench inspect --session DIR
    ctxbench compact --session DIR [--instruction TEXT] (--preview | --apply) [--model M]
    ctxbench import FILE --session DIR [--format NAME]
    ctxbench sources [--json] [--refresh]
    ctxbench follow PATH [--new-only]   (app/cli_follow.py: a growing session file's calls as JSON lines)
    ctxbench export --session DIR --format md|csv|json [-o FILE]   (app.cli_export)
    ctxbench diff SESSION_OR_FILE A B [--json]   (app.cli_diff: what entered / left the context)
    ctxbench tools SESSION_OR_FILE [--top N] [--json]   (app.cli_tools: tokens by tool)
    ctxbench usage [--by day|project|model|session|tool] [--since DATE] [--json]   (app.cli_usage: cost)
    ctxbench proxy [--port N] [--upstream URL]   (app.cli_record: the recording proxy, for agents started elsewhere)
    ctxbench record [--upstream URL] -- COMMAND …   (app.cli_record: run an agent through the recording proxy)

``sources --json`` prints one JSON object per session (``"type": "source"``), newest first.
``run`` prints one JSON object per line per event, each with a ``"type"`` (engine.model.events.event_to_json):
``message``, ``text_delta``, ``tool_call_started``, ``tool_call_finished``, ``context`` (``window`` and
integer ``regions``: system, summary, history, tools, reserve, free), ``compaction_started``,
``compaction`` (``trigger``, ``tokens_before``, ``tokens_after``, ``messages_compacted``, ...),
``compaction_failed``, ``error``, ``state``, ``turn_finished``. After the turn it waits for the
background (auto) compaction, so that its events are printed and recorded before it exits.

Exit codes: 0 success; 2 usage error (argparse); 1 runtime error, with one line on stderr.
Settings come from ``engine.store.config.load_settings()`` (settings.toml, ``CTXBENCH_*``); flags override
them; settings problems are printed to stderr as warnings. Set ``CTXBENCH_DEBUG=1`` for tracebacks.

litellm is imported only when a model is called (or asked for its window): ``inspect`` of a session
that ran or was imported, and ``import`` with ``--no-model-info``, never load it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.model.text import json_safe, one_line, printable
from engine.store import logs
from engine.store.config import LOCAL_MODEL, Settings, load_settings

log = logging.getLogger(__name__)

PROG = "ctxbench"
SOURCE_PROBLEMS_SHOWN = 10  # `sources`: files that could not be read named on stderr, then "and N more"
COMMANDS = ("run", "inspect", "compact", "import", "sources", "follow", "export", "diff", "tools", "usage",
            "proxy", "record")


class CLIError(Exception):
    """A runtime error reported as one line on stderr (exit code 1)."""


class UsageError(Exception):
    """A bad combination of arguments found after parsing (exit code 2)."""


# --------------------------------------------------------------------------- output


def _json_line(obj: Any) -> str:
    """One JSON line; the characters a terminal acts on that json.dumps leaves raw (C1, bidi controls, lone
    surrogates) as ``\\uNNNN`` escapes: the same JSON value, safe to print."""
    try:
        return json_safe(json.dumps(obj, ensure_ascii=False, default=str))
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, default=str)


class Printer:
    """Writes JSON lines to stdout; a closed pipe stops the output, not the work."""

    def __init__(self) -> None:
        self.closed = False

    def __call__(self, obj: dict[str, Any]) -> None:
        if self.closed:
            return
        line = _json_line(obj)
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except UnicodeEncodeError:
            sys.stdout.write(json.dumps(obj, ensure_ascii=True, default=str) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            self.closed = True
            try:  # stop Python complaining at exit about the closed stdout
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except OSError:
                pass


def warn(text: str) -> None:
    """One line on stderr; control characters in it (a path or a name from another agent's files) escaped."""
    print(f"{PROG}: warning: {printable(one_line(text))}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- arguments


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help=f"litellm model name (default: the settings' model, else {LOCAL_MODEL})")
    p.add_argument("--api-base", help="base URL of an OpenAI-compatible or other provider endpoint")
    p.add_argument(
        "--context-window", type=_positive_int, metavar="N",
        help="context window in tokens (overrides model info; for the offline model it is also its n_ctx)",
    )
    p.add_argument(
        "--max-tokens", type=_positive_int, metavar="N", help="output limit per call (the reserve)"
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; ``only``: the one sub-command to parse (its module alone imported: a command starts
    sooner), else all of them."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Context Workbench: see and control what fills an LLM agent's context window. "
        "Without a command, the desktop app starts.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    if only in (None, "run"):
        _add_run(sub)
    if only in (None, "inspect", "compact", "import", "sources"):
        _add_session_commands(sub)
    _add_module_commands(sub, only)
    return parser


def _add_run(sub: Any) -> None:
    run = sub.add_parser("run", help="run one agent turn and print its events as JSON lines")
    run.add_argument("--session", required=True, type=Path, metavar="DIR",
                     help="session folder (created when it does not exist or is empty)")
    _add_model_args(run)
    run.add_argument("--workspace", type=Path, metavar="DIR",
                     help="folder the tools may read (default: the settings' workspace, else the "
                     "current folder)")
    run.add_argument("--allow-write", action="store_true",
                     help="enable the write_file tool (asks for approval)")
    run.add_argument("--allow-shell", action="store_true",
                     help="enable the run_shell tool (asks for approval)")
    run.add_argument("--yes", action="store_true", help="approve every write_file / run_shell call")
    run.add_argument("--no-text-deltas", action="store_true", help="do not print text_delta events")
    run.add_argument("prompt", metavar="PROMPT", help="the user message ('-' reads it from stdin)")



def _add_session_commands(sub: Any) -> None:
    ins = sub.add_parser("inspect", help="print the session's current context snapshot as JSON")
    ins.add_argument("--session", required=True, type=Path, metavar="DIR")
    _add_model_args(ins)

    comp = sub.add_parser("compact", help="preview or apply a manual compaction")
    comp.add_argument("--session", required=True, type=Path, metavar="DIR")
    comp.add_argument("--instruction", help="extra instruction for the summary")
    mode = comp.add_mutually_exclusive_group(required=True)
    mode.add_argument("--preview", action="store_true", help="show the plan and the summary; change nothing")
    mode.add_argument("--apply", action="store_true", help="compact: archive, summarize, replace (undoable)")
    comp.add_argument("--summary-mode", choices=("auto", "digest", "model", "both"),
                      help="how the summary is made (default: the summary_mode setting)")
    _add_model_args(comp)

    from engine.sources import formats  # (the registry: every list of agents below is its)

    imp = sub.add_parser(
        "import",
        help=f"import an agent's session file as a session ({formats.spoken_list(formats.importable())})",
    )
    imp.add_argument("file", type=Path, metavar="FILE")
    imp.add_argument("--format", metavar="NAME",
                     help="read the file as this format instead of detecting it: "
                     f"{', '.join(formats.importable())}")
    imp.add_argument("--session", required=True, type=Path, metavar="DIR", help="new session folder")
    imp.add_argument("--title", help="session title (default: from the file)")
    imp.add_argument("--no-model-info", action="store_true",
                     help="do not look up the model's window (use the window the log's usage implies)")
    src = sub.add_parser("sources", help="list the agent sessions on this machine "
                         f"({formats.spoken_list(formats.names(listed=True))}), newest first")
    src.add_argument("--json", action="store_true", help="one JSON object per session, one per line (type "
                                                         "\"source\"; a file that could not be read: \"unreadable\")")
    src.add_argument("--refresh", action="store_true", help="re-read every file (ignore the index cache)")


# the sub-commands each module adds (its ``add_parser``), in the order the help lists them
MODULE_COMMANDS = (("cli_follow", ("follow",)), ("cli_export", ("export",)), ("cli_diff", ("diff",)),
                   ("cli_tools", ("tools",)), ("cli_usage", ("usage",)), ("cli_record", ("proxy", "record")))


def _add_module_commands(sub: Any, only: str | None) -> None:
    import importlib

    for name, commands in MODULE_COMMANDS:
        if only is None or only in commands:
            importlib.import_module(f"app.{name}").add_parser(sub)


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata is slow to import)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.exit(message=f"{PROG} {_version()}\n")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ctxbench")
    except ImportError:  # importlib.metadata.PackageNotFoundError: run from a checkout, not installed
        return "unknown"


# --------------------------------------------------------------------------- settings and sessions


def load_effective_settings(args: argparse.Namespace) -> Settings:
    """Settings from the file and environment (problems → warnings), then the flags."""
    loaded = load_settings()
    for problem in loaded.problems:
        warn(problem)
    settings = loaded.settings
    changes: dict[str, Any] = {}
    if getattr(args, "model", None):
        changes["model"] = args.model
    if getattr(args, "api_base", None) is not None:
        changes["api_base"] = args.api_base
    if getattr(args, "max_tokens", None):
        changes["max_tokens"] = args.max_tokens
    if getattr(args, "context_window", None):
        changes["context_window"] = args.context_window
        from engine.llm.local_model import is_local

        if is_local(changes.get("model", settings.model)):
            changes["local_n_ctx"] = max(64, args.context_window)
    if getattr(args, "workspace", None) is not None:
        changes["workspace"] = str(args.workspace)
    if getattr(args, "allow_write", False):
        changes["allow_write"] = True
    if getattr(args, "allow_shell", False):
        changes["allow_shell"] = True
    if getattr(args, "summary_mode", None):
        changes["summary_mode"] = args.summary_mode
    try:
        return settings.replace(**changes) if changes else settings
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _is_session_dir(path: Path) -> bool:
    from engine.store.session_load import HISTORY_FILE, SESSION_FILE

    return (path / SESSION_FILE).exists() or (path / HISTORY_FILE).exists()


def open_session(
    path: Path, settings: Settings, *, create: bool = False, title: str = "", lock: bool = False
) -> Any:
    """Load the session at ``path``; with ``create``, make it when the folder is missing or empty.

    ``lock`` (commands that write) holds the folder against other ctxbench processes until closed.
    """
    from engine.context.conversation import Session
    from engine.context.tokens import make_estimator
    from engine.store.session import SessionLockedError
    from engine.workbench.document import open_session_folder

    estimator = make_estimator(settings.estimator, settings.model)
    if create and (not path.exists() or (path.is_dir() and not any(path.iterdir()))):
        session = Session.create(path, title, estimator=estimator)
        if lock:
            session.lock()
        return session
    if not path.exists():
        raise CLIError(f"no session folder at {path}")
    if not path.is_dir():
        raise CLIError(f"{path} is not a folder")
    if not _is_session_dir(path):
        raise CLIError(f"{path} is not a session folder (no session.json or history.jsonl in it)")
    retention = settings.offload_retention_days if create else None
    try:  # the service's way of opening a session folder (counted; locked: one writer per folder)
        session = open_session_folder(path, estimator, retention_days=retention, lock=lock)
    except SessionLockedError as exc:
        raise CLIError(str(exc)) from None
    if not session.load_report.clean:
        warn(f"session {path}: {session.load_report.describe()}")
    return session


# --------------------------------------------------------------------------- run


async def _ask_on_terminal(name: str, arguments: dict[str, Any]) -> bool:
    import asyncio

    shown = printable(one_line(json.dumps(arguments, ensure_ascii=False)))
    if len(shown) > 500:
        shown = shown[:499] + "…"

    def ask() -> bool:
        sys.stderr.write(f"{PROG}: allow {printable(name)} {shown}? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
        return answer.strip().lower() in ("y", "yes")

    return await asyncio.to_thread(ask)


async def _approve_all(name: str, arguments: dict[str, Any]) -> bool:
    return True


async def _deny(name: str, arguments: dict[str, Any]) -> bool:
    warn(f"{name} was not approved (pass --yes to approve tool calls)")
    return False


async def cmd_run(args: argparse.Namespace, settings: Settings, out: Printer) -> int:
    import asyncio

    from engine.model.events import ErrorEvent, Event, TextDelta, TurnFinished, event_to_json
    from engine.workbench.runtime import build_agent

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    workspace = Path(settings.workspace).expanduser() if settings.workspace else Path.cwd()
    if not workspace.is_dir():
        raise CLIError(f"the workspace folder does not exist: {workspace}")
    session = open_session(args.session, settings, create=True, title=one_line(prompt)[:60], lock=True)
    errors: list[str] = []

    def emit(event: Event) -> None:
        if isinstance(event, ErrorEvent) and not event.retrying:
            errors.append(event.message)
        if isinstance(event, TextDelta) and args.no_text_deltas:
            return
        out(event_to_json(event))

    if args.yes:
        approve = _approve_all
    elif sys.stdin.isatty() and args.prompt != "-":
        approve = _ask_on_terminal
    else:
        approve = _deny
    result: TurnFinished | None = None
    try:
        agent = build_agent(session, settings, workspace=workspace, approve=approve, emit=emit)
        result = await agent.run_turn(prompt)
        if agent.auto_task is not None:
            try:
                await agent.auto_task
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a background task's top: its failure is said, the turn's answer stands
                log.warning("the background compaction failed", exc_info=True)
                warn(f"the background compaction failed: {type(exc).__name__}: {exc}")
    finally:
        session.close()
    if result is not None and result.ok:
        return 0
    raise CLIError(errors[-1] if errors else "the turn did not finish")


# --------------------------------------------------------------------------- inspect, compact, import


def cmd_inspect(args: argparse.Namespace, settings: Settings, out: Printer) -> int:
    from engine.agent import context_snapshot
    from engine.context.window import session_window

    session = open_session(args.session, settings)
    try:
        window = session_window(session, settings, model=args.model, max_tokens=args.max_tokens)
        if not args.model and session.meta.get("model"):  # label the snapshot with the session's model
            settings = dataclasses.replace(settings, model=str(session.meta["model"]))
        snap = context_snapshot(session, settings, window=window)
        data = snap.to_json()
        data.update(
            type="context",
            session=session.id,
            path=str(session.path),
            title=session.title,
            messages=len(session.messages),
            summary_chars=len(session.summary),
            compactions=len(session.compaction_events()),
            calls_recorded=len(session.snapshots()),
        )
        out(data)
    finally:
        session.close()
    return 0


def _snapshot_brief(snap: Any) -> dict[str, Any]:
    return {
        "window": snap.window,
        "regions": snap.regions(),
        "used": snap.used,
        "overflow": snap.overflow,
        "accuracy": snap.accuracy,
    }


async def cmd_compact(args: argparse.Namespace, settings: Settings, out: Printer) -> int:
    from engine.context.compaction import Compactor
    from engine.context.plan import CompactionError
    from engine.context.summaries import summary_figures
    from engine.context.window import session_window
    from engine.llm import client as llm
    from engine.model.compaction_change import compaction_change
    from engine.model.events import Event, event_to_json

    session = open_session(args.session, settings, lock=bool(args.apply))
    try:
        window = session_window(session, settings, max_tokens=args.max_tokens)
        config = llm.config_from_settings(settings)

        def emit(event: Event) -> None:
            out(event_to_json(event))

        compactor = Compactor(
            session,
            settings,
            llm.make_summarizer(config),
            estimator=session.estimator,
            window=window,
            emit=emit,
        )
        preview = await compactor.preview(args.instruction)
        plan = preview.plan
        out(
            {
                "type": "compaction_preview",
                "needed": plan.needed,
                "reason": plan.reason,
                "messages_compacted": len(plan.compact),
                "messages_kept": len(plan.keep),
                "compact_ids": plan.compact_ids,
                "keep_ids": plan.keep_ids,
                # the prompt as sent, the basis of every view's before → after (engine.model.compaction_change)
                "tokens_before": preview.before.prompt,
                "tokens_after": preview.after.prompt,
                "tokens_basis": "prompt",
                "grows": compaction_change(preview.before.prompt, preview.after.prompt).grows,
                "summary": preview.summary.text,
                "summary_valid": preview.summary.valid,
                "summary_problem": preview.summary.reason,
                "summary_ms": round(preview.summary.duration_ms, 1),
                **summary_figures(preview.summary),
                "instruction": args.instruction,
                "before": _snapshot_brief(preview.before),
                "after": _snapshot_brief(preview.after),
                "applied": False,
            }
        )
        if args.preview:
            return 0
        try:
            await compactor.apply(preview)
        except CompactionError as exc:
            raise CLIError(str(exc)) from None
        return 0
    finally:
        session.close()


def cmd_import(args: argparse.Namespace, settings: Settings, out: Printer) -> int:
    from engine.ingest import import_source
    from engine.sources.detect import parse_format
    from engine.sources.model import SourceError
    from engine.sources.opencode import split_path

    try:
        fmt = parse_format(args.format) if args.format else None
    except SourceError as exc:
        raise UsageError(str(exc)) from None
    model_info = None
    if not args.no_model_info:
        from engine.llm import client as llm

        model_info = llm.model_info
    if args.session.exists() and not (args.session.is_dir() and not any(args.session.iterdir())):
        raise CLIError(f"cannot import into {args.session}: it already exists")
    if not split_path(args.file)[0].is_file():  # an OpenCode session (``opencode.db#ses_…``): its database
        raise CLIError(f"no file at {args.file}")
    try:
        report = import_source(
            args.file, session_dir=args.session, fmt=fmt, title=args.title, settings=settings, model_info=model_info
        )
    except SourceError as exc:
        raise CLIError(str(exc)) from None
    out(report.to_json())
    return 0


def cmd_sources(args: argparse.Namespace, settings: Settings, out: Printer) -> int:
    from engine.sources.discovery import ScanProblem, format_table, scan_sources
    from engine.sources.model import shown_path

    problems: list[ScanProblem] = []
    entries = scan_sources(settings, refresh=args.refresh, problems=problems)
    for problem in problems[:SOURCE_PROBLEMS_SHOWN]:  # each file left out, on stderr (the list goes on)
        warn(f"{shown_path(problem.path)}: {problem.reason}")
    if len(problems) > SOURCE_PROBLEMS_SHOWN:
        warn(f"and {len(problems) - SOURCE_PROBLEMS_SHOWN} more file(s) that could not be read")
    if args.json:
        for entry in entries:
            out({"type": "source", **entry.to_json()})
        for problem in problems:  # after the sources: a consumer that reads only "source" lines is unchanged
            out({"type": "unreadable", **problem.to_json()})
        return 0
    text = format_table(entries)
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0


# --------------------------------------------------------------------------- entry point


def _start_gui(argv: list[str]) -> int:
    try:
        from app.main import run_gui
    except ImportError as exc:
        print(
            f"{PROG}: error: the desktop app cannot start ({one_line(str(exc))}); "
            f"the headless commands still work: {', '.join(COMMANDS)} (see '{PROG} --help')",
            file=sys.stderr,
        )
        return 1
    code = run_gui(argv)
    return int(code) if isinstance(code, int) else 0


def _wants_gui(argv: Sequence[str]) -> bool:
    if not argv:
        return True
    first = argv[0]
    if first == "gui":
        return True
    return first.startswith("-") and first not in ("-h", "--help", "--version")


async def _with_signals(coro: Any) -> int:
    """Run ``coro``; SIGTERM cancels it like Ctrl-C does, so the turn settles its history."""
    import asyncio

    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    except (NotImplementedError, RuntimeError, ValueError):
        pass
    try:
        return int(await task)
    finally:
        try:
            loop.remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


def _dispatch(args: argparse.Namespace, out: Printer) -> int:
    if args.command == "follow":  # needs no settings
        from app.cli_follow import FollowUsageError, cmd_follow
        from engine.sources.model import SourceError

        try:
            return cmd_follow(args, out)
        except FollowUsageError as exc:
            raise UsageError(str(exc)) from None
        except SourceError as exc:
            raise CLIError(str(exc)) from None
    if args.command in ("proxy", "record"):  # the recording proxy (app/cli_record.py): needs no settings
        from app import cli_record

        if args.command == "proxy":
            return cli_record.cmd_proxy(args, out, CLIError)
        return cli_record.cmd_record(args, out, CLIError, UsageError)
    if args.command in ("diff", "tools"):  # need no settings (app/cli_diff.py, app/cli_tools.py)
        from app import cli_diff, cli_tools

        return (cli_diff.cmd_diff if args.command == "diff" else cli_tools.cmd_tools)(args, out, CLIError)
    settings = load_effective_settings(args)
    if args.command in ("run", "compact"):  # (asyncio imported by the commands that run a loop, only)
        import asyncio

        coro = cmd_run(args, settings, out) if args.command == "run" else cmd_compact(args, settings, out)
        return asyncio.run(_with_signals(coro))
    if args.command == "inspect":
        return cmd_inspect(args, settings, out)
    if args.command == "import":
        return cmd_import(args, settings, out)
    if args.command == "sources":
        return cmd_sources(args, settings, out)
    if args.command == "export":
        from app import cli_export

        return cli_export.cmd_export(args, settings, out, CLIError)
    if args.command == "usage":
        from app.cli_usage import cmd_usage

        return cmd_usage(args, settings, out, CLIError)
    raise UsageError(f"unknown command {args.command!r}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _wants_gui(argv):
        return _start_gui(argv[1:] if argv and argv[0] == "gui" else argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)  # exits with 2 on a usage error
    if args.command is None:
        return _start_gui([])
    out = Printer()
    logs.configure_from_settings()
    log.info("ctxbench %s", args.command)
    try:
        return _dispatch(args, out)
    except UsageError as exc:
        parser.error(printable(one_line(str(exc))))  # exit code 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except CLIError as exc:
        print(f"{PROG}: error: {printable(one_line(str(exc)))}", file=sys.stderr)
        return 1
    except Exception as exc:  # the CLI's main: one line, no traceback (CTXBENCH_DEBUG=1 shows it; the log has it)
        log.exception("ctxbench %s failed", args.command)
        if os.environ.get("CTXBENCH_DEBUG"):
            traceback.print_exc()
        print(f"{PROG}: error: {printable(one_line(f'{type(exc).__name__}: {exc}'))}", file=sys.stderr)
        return 1
    except BaseException as exc:
        if not _cancelled(exc):
            raise
        print(f"{PROG}: stopped", file=sys.stderr)
        return 143
    return 1


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is asyncio's CancelledError (asyncio is imported only by the commands that run a loop)."""
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and isinstance(exc, asyncio.CancelledError)


if __name__ == "__main__":
    sys.exit(main())
