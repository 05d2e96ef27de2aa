"""The Workbench service (Qt-free): :class:`engine.workbench.service.Workbench` and its typed events and view models.

:class:`Workbench` (service) holds its parts, each given the objects it uses: core (settings, store,
listeners, tasks, approvals, the agent's state), document (the open session or read-only view and its agent:
the only way to open, replace or close it, and the read-only and busy guards), runtime (litellm's warm-up,
the model's info, the estimator, the agent built), display (the next request's snapshot, the context state,
the throttle), and the parts on them: sessions, turns (send/stop, engine events → service events),
compaction_ui (preview/apply/undo/clear/restore), sources (read-only views, follow), inspector, analysis, keys
(settings, API keys), commands (slash commands), usage. Around them: policy (the read-only rule), tasks (named
cancellable tasks), approvals (futures), throttle, views (SessionView, ContextState, Marker), events (typed
events out).

This package's ``__init__`` imports nothing: importing any of its modules runs it first, so a name handed out from
here (even lazily) would make an import cycle (tests/test_boundary.py). Import from the modules themselves.
"""
