"""engine.agent.imported_window: the window and model an imported session is drawn against."""

from __future__ import annotations

from pathlib import Path

from engine.agent import context_snapshot
from engine.context.conversation import Session
from engine.context.window import imported_window
from engine.ingest import import_source
from engine.store.config import Settings
from tests.engine.sources.conftest import BIG_CODEX


def test_an_imported_session_is_drawn_against_its_own_model_until_a_turn_runs(tmp_path: Path) -> None:
    settings = Settings(model="openai/gpt-4o-mini", context_window=8_192, max_tokens=512)
    report = import_source(BIG_CODEX, session_dir=tmp_path / "s", settings=settings)
    session = Session.load(tmp_path / "s")
    try:
        own = imported_window(session, settings)
        assert own is not None
        window, model = own
        assert (window.context_window, model) == (258_400, "gpt-5.3-codex") == (report.window, report.model)
        assert window.max_tokens == 512
        snap = session.snapshot(settings, window=window, model=model)
        assert (snap.window, snap.model) == (258_400, "gpt-5.3-codex")
        inspected = context_snapshot(session, settings)  # `ctxbench inspect`: the same as the window's bar
        assert (inspected.window, inspected.model) == (258_400, "gpt-5.3-codex")
        session.set_meta(window={"context_window": 8_192, "max_tokens": 512, "source": "override"})  # a turn ran
        assert imported_window(session, settings) is None
    finally:
        session.close()


def test_a_session_of_ours_has_no_imported_window(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "ours", "ours")
    try:
        assert imported_window(session, Settings()) is None
        session.set_meta(**{"import": {"window": 0}})  # an import that settled on no window
        assert imported_window(session, Settings()) is None
    finally:
        session.close()
