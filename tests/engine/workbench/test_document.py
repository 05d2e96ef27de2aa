"""engine.workbench.document: the one owner of what is open (session or view, and its agent), its guards, and the
folder opening the service and the CLI share."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine.context.conversation import Session, SessionStore
from engine.context.tokens import HeuristicEstimator, make_estimator
from engine.store.session import SessionError, SessionLockedError
from engine.workbench.document import OpenDocument, open_session_folder
from engine.workbench.policy import READ_ONLY
from engine.workbench.source_views import SourceView
from engine.workbench.tasks import TaskGroup

REPO = Path(__file__).resolve().parents[3]
OWNED = {"session", "view", "agent", "_session", "_view", "_agent"}


def _doc() -> tuple[OpenDocument, TaskGroup, list[str], list[Session]]:
    tasks, warned, built = TaskGroup(), [], []

    def make_agent(session: Session) -> Any:
        built.append(session)
        return f"agent of {session.id}"

    return OpenDocument(tasks, make_agent, warned.append), tasks, warned, built


def test_only_the_document_writes_the_open_session_view_and_agent() -> None:
    """No other module of the service assigns ``.session`` / ``.view`` / ``.agent`` (the grep, on the AST)."""
    writers = []
    for path in sorted((REPO / "engine" / "workbench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign | ast.AugAssign) else []
            for target in targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(t, ast.Attribute) and t.attr in OWNED:
                        writers.append(f"{path.name}:{t.lineno}")
    assert writers and {w.split(":")[0] for w in writers} == {"document.py"}


def test_open_replace_close(tmp_path: Path) -> None:
    doc, _, _, built = _doc()
    first = Session.create(tmp_path / "a", "a", estimator=HeuristicEstimator())
    doc.open(first)
    assert doc.session is first and doc.agent == f"agent of {first.id}" and doc.writable and doc.is_open
    with pytest.raises(RuntimeError):
        doc.open(first)  # one document at a time: close it first
    with pytest.raises(RuntimeError):
        doc.replace(first)  # only a view is read again
    assert doc.close() is None and first.closed and doc.session is None and doc.agent is None
    view = SourceView(tmp_path / "v", tmp_path / "v", "src.jsonl", "codex", "p")
    shown = Session.create(tmp_path / "v", "v", estimator=HeuristicEstimator())
    doc.open(shown, view)
    again = Session.load(tmp_path / "v", estimator=HeuristicEstimator())
    assert doc.replace(again) is shown and not shown.closed  # the caller closes it once the window has the new one
    assert doc.session is again and doc.view is view and not doc.writable and built == [first, shown, again]
    assert doc.close() is view and again.closed and doc.view is None


@pytest.mark.asyncio
async def test_the_guards_are_asked_here(tmp_path: Path) -> None:
    doc, tasks, warned, _ = _doc()
    assert not doc.refuses("send") and not doc.refuses_busy("a turn is running")
    doc.open(Session.create(tmp_path / "v", "v", estimator=HeuristicEstimator()),
             SourceView(tmp_path / "v", tmp_path / "v", "", "", ""))
    assert doc.refuses("send") and warned == [READ_ONLY]
    assert not doc.refuses("run_command", "new")
    tasks.spawn("turn", asyncio.sleep(10))
    assert doc.busy and doc.refuses_busy("a turn is running") and warned[-1] == "a turn is running"
    await tasks.cancel_and_wait("turn")
    assert not doc.busy
    doc.close()


def test_open_session_folder_counts_imports_as_imported_and_locks(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "store")
    made = store.create("imported", estimator=HeuristicEstimator(), **{"import": {"format": "codex"}})
    made.close()
    own = make_estimator("heuristic", "x")
    theirs = HeuristicEstimator()
    session = open_session_folder(made.id, own, store=store, imported=theirs, lock=True)
    assert session.estimator is theirs and session.meta.get("import")
    with pytest.raises(SessionLockedError):  # one writer per folder
        open_session_folder(made.path, own, lock=True)
    session.close()
    again = open_session_folder(made.path, own, lock=True)  # the failed one was closed: nothing held
    again.close()
    with pytest.raises(SessionError):
        open_session_folder(tmp_path, own)  # not a session folder
