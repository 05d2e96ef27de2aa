"""Import a session file from any agent: the entry point of ``ctxbench import`` and the app's Open.

:func:`import_transcript` recognises a Claude Code, Codex, OpenHands or SWE-agent session file and
hands it to :func:`engine.ingest.import_source`; an OpenAI-format log (a JSON list of messages,
JSONL, or mini-swe-agent's ``.traj.json``) is read by :mod:`engine.transcript`.
"""

from __future__ import annotations

from pathlib import Path

from engine.context.conversation import SessionStore
from engine.context.tokens import Estimator, HeuristicEstimator
from engine.context.window import ModelInfo
from engine.ingest import SourceImportReport, import_source
from engine.model.snapshot import WindowInfo
from engine.sources.detect import detect_format
from engine.sources.formats import LOG_FORMATS
from engine.sources.model import SourceError
from engine.store.config import Settings
from engine.transcript import (
    ImportReport,
    TranscriptError,
    import_openai_log,
)


def import_transcript(
    path: Path,
    *,
    store: SessionStore | None = None,
    session_dir: Path | None = None,
    title: str | None = None,
    settings: Settings | None = None,
    window: WindowInfo | int | None = None,
    model_info: ModelInfo | None = None,
    estimator: Estimator | None = None,
    other_agents: bool = True,
) -> ImportReport | SourceImportReport:
    """Import ``path`` as a new session (in ``store``, or at ``session_dir``); return the report.

    ``model_info`` (e.g. ``engine.llm.client.model_info``) looks up the model's window; without it, and
    without ``window`` or a window override in ``settings``, the window is the smallest multiple of
    1024 that held every reported prompt (``window_source == "observed"``).

    With ``other_agents`` (the default), a Claude Code, Codex, OpenHands or SWE-agent session file
    is recognised and read by :mod:`engine.sources` instead (its report has the same ``session_id``,
    ``path`` and ``describe()``).
    """
    path = Path(path)
    settings = settings or Settings()
    estimator = estimator or HeuristicEstimator()
    if other_agents:
        report = _import_other_agent(path, store, session_dir, title, settings, model_info, estimator)
        if report is not None:
            return report
    return import_openai_log(path, store=store, session_dir=session_dir, title=title, settings=settings,
                             window=window, model_info=model_info, estimator=estimator)


def _import_other_agent(
    path: Path,
    store: SessionStore | None,
    session_dir: Path | None,
    title: str | None,
    settings: Settings,
    model_info: ModelInfo | None,
    estimator: Estimator,
) -> SourceImportReport | None:
    """The import of another agent's session file, or None when ``path`` is an OpenAI-format log."""
    try:
        fmt = detect_format(path)
    except SourceError:
        return None  # not recognised: the OpenAI-format parser names what is wrong with it
    if fmt in LOG_FORMATS:
        return None
    if session_dir is None:
        store = store or SessionStore()
        session_dir = store.path_for(store.new_id())
    try:
        return import_source(path, session_dir=session_dir, fmt=fmt, title=title, settings=settings,
                             estimator=estimator, model_info=model_info)
    except SourceError as exc:
        raise TranscriptError(str(exc)) from None
