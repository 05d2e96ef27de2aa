"""The Workbench service (Qt-free): :class:`engine.workbench.service.Workbench` and its typed events and view models.

:class:`Workbench` (service) holds its parts, each with the state it owns, on one shared core: core
(settings, store, open session or view, the agent, snapshots, the read-only policy), sessions, turns
(send/stop, engine events → service events), compaction_ui (preview/apply/undo/clear/restore),
sources (read-only views, follow), inspector, analysis, keys (settings, API keys), commands (slash
commands), usage. Around them: policy (the read-only rule), tasks (named cancellable tasks), approvals
(futures), throttle (the one snapshot throttle), views (SessionView, ContextState, Marker), events
(typed events out).

This package's ``__init__`` imports nothing: importing any of its modules runs it first, so a name handed out from
here (even lazily) would make an import cycle (tests/test_boundary.py). Import from the modules themselves.
"""
