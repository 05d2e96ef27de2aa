"""Light/dark theme that follows the system colour scheme, and the region colours every view shares.

The context chart, its legend, the compaction preview and the status bar all colour the regions of
the context window the same way; they take their colours from :func:`palette` so that a region
looks the same everywhere and both schemes stay readable.

Public API
----------
- ``REGION_ORDER``: the regions of the next request in stacking order (``system``, ``summary``,
  ``history_user``, ``history_assistant``, ``history_tool``, ``tools``, ``draft``, ``reserve``,
  ``free``); ``REGION_LABELS`` maps each to its human label.
- ``Palette``: frozen dataclass of colours (hex strings) for one scheme: ``regions`` (region →
  colour), ``threshold``, ``limit``, ``provider``, ``estimate``, ``marker``, ``text``, ``muted``,
  ``background``, ``panel``, ``user_bubble``, ``assistant_bubble``, ``tool_bubble``, ``border``,
  ``link``, ``error``, ``ok``, ``warning``.
- ``LIGHT`` / ``DARK``: the two palettes.
- ``system_is_dark() -> bool``: the system colour scheme via
  ``QGuiApplication.styleHints().colorScheme()`` (falls back to the window colour's lightness when the
  platform reports ``Unknown``).
- ``palette(mode="system") -> Palette``: the palette for ``"system" | "light" | "dark"``.
- ``apply_theme(app, mode="system") -> Palette``: asks Qt for the scheme (``styleHints().setColorScheme``),
  sets the application palette for forced light/dark and returns the palette now in force.
- ``ThemeWatcher(QObject)``: emits ``changed(Palette)`` when the system scheme changes (only while its
  mode is ``"system"``); ``set_mode(mode)`` switches and re-emits.
- ``format_tokens(n) -> str``: ``12,345`` style numbers used by every view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette

from engine.model.snapshot import REGION_LABELS as ENGINE_REGION_LABELS

REGION_ORDER: tuple[str, ...] = (
    "system",
    "summary",
    "history_user",
    "history_assistant",
    "history_tool",
    "tools",
    "draft",
    "reserve",
    "free",
)

REGION_LABELS: dict[str, str] = ENGINE_REGION_LABELS  # one list: engine.model.snapshot

MODES = ("system", "light", "dark")


@dataclass(frozen=True)
class Palette:
    """Colours (``#rrggbb``) of one scheme; region colours are shared by chart, legend and preview."""

    name: str
    regions: dict[str, str] = field(default_factory=dict)
    threshold: str = "#d97706"
    limit: str = "#dc2626"
    provider: str = "#111827"
    estimate: str = "#6b7280"
    marker: str = "#7c3aed"
    text: str = "#111827"
    muted: str = "#6b7280"
    background: str = "#ffffff"
    panel: str = "#f3f4f6"
    user_bubble: str = "#e0ecff"
    assistant_bubble: str = "#ffffff"
    tool_bubble: str = "#f4f4f5"
    border: str = "#d1d5db"
    link: str = "#1d4ed8"
    error: str = "#b91c1c"
    ok: str = "#15803d"
    warning: str = "#b45309"

    @property
    def dark(self) -> bool:
        return self.name == "dark"


LIGHT = Palette(
    name="light",
    regions={
        "system": "#64748b",
        "summary": "#8b5cf6",
        "history_user": "#2563eb",
        "history_assistant": "#60a5fa",
        "history_tool": "#0d9488",
        "tools": "#f59e0b",
        "draft": "#ec4899",
        "reserve": "#94a3b8",
        "free": "#e5e7eb",
    },
)

DARK = Palette(
    name="dark",
    regions={
        "system": "#94a3b8",
        "summary": "#a78bfa",
        "history_user": "#3b82f6",
        "history_assistant": "#93c5fd",
        "history_tool": "#2dd4bf",
        "tools": "#fbbf24",
        "draft": "#f472b6",
        "reserve": "#64748b",
        "free": "#2a2f3a",
    },
    threshold="#fbbf24",
    limit="#f87171",
    provider="#f9fafb",
    estimate="#9ca3af",
    marker="#c4b5fd",
    text="#e5e7eb",
    muted="#9ca3af",
    background="#16181d",
    panel="#1f2229",
    user_bubble="#1e3a5f",
    assistant_bubble="#1f2229",
    tool_bubble="#24272f",
    border="#3a3f4b",
    link="#93c5fd",
    error="#f87171",
    ok="#4ade80",
    warning="#fbbf24",
)


def _app() -> QGuiApplication | None:
    inst = QGuiApplication.instance()
    return inst if isinstance(inst, QGuiApplication) else None


def system_is_dark() -> bool:
    """True when the system (or the running application) uses a dark colour scheme."""
    app = _app()
    if app is None:
        return False
    scheme = app.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def palette(mode: str = "system") -> Palette:
    """The palette for ``mode`` (``system`` follows the platform scheme)."""
    if mode not in MODES:
        raise ValueError(f"theme must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "dark":
        return DARK
    if mode == "light":
        return LIGHT
    return DARK if system_is_dark() else LIGHT


def qt_palette(pal: Palette) -> QPalette:
    """A QPalette for widgets drawn by the style (used when light/dark is forced)."""
    qp = QPalette()
    base = QColor(pal.background)
    panel = QColor(pal.panel)
    text = QColor(pal.text)
    qp.setColor(QPalette.ColorRole.Window, panel)
    qp.setColor(QPalette.ColorRole.WindowText, text)
    qp.setColor(QPalette.ColorRole.Base, base)
    qp.setColor(QPalette.ColorRole.AlternateBase, panel)
    qp.setColor(QPalette.ColorRole.Text, text)
    qp.setColor(QPalette.ColorRole.Button, panel)
    qp.setColor(QPalette.ColorRole.ButtonText, text)
    qp.setColor(QPalette.ColorRole.ToolTipBase, panel)
    qp.setColor(QPalette.ColorRole.ToolTipText, text)
    qp.setColor(QPalette.ColorRole.PlaceholderText, QColor(pal.muted))
    qp.setColor(QPalette.ColorRole.Link, QColor(pal.link))
    qp.setColor(QPalette.ColorRole.Highlight, QColor(pal.regions["history_user"]))
    qp.setColor(QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        qp.setColor(QPalette.ColorGroup.Disabled, role, QColor(pal.muted))
    return qp


def apply_theme(app: QGuiApplication, mode: str = "system") -> Palette:
    """Apply ``mode`` to the application and return the palette in force.

    ``system`` hands the choice back to the platform (``Qt.ColorScheme.Unknown``) and keeps the
    platform palette; ``light``/``dark`` request that scheme and set a matching QPalette so that
    widgets drawn by the style agree with our own colours.
    """
    if mode not in MODES:
        raise ValueError(f"theme must be one of {', '.join(MODES)}, got {mode!r}")
    hints = app.styleHints()
    if mode == "system":
        hints.unsetColorScheme()
        app.setPalette(QPalette())
        return palette("system")
    pal = DARK if mode == "dark" else LIGHT
    hints.setColorScheme(Qt.ColorScheme.Dark if mode == "dark" else Qt.ColorScheme.Light)
    app.setPalette(qt_palette(pal))
    return pal


class ThemeWatcher(QObject):
    """Re-emits a system colour-scheme change as ``changed(Palette)`` while the mode is ``system``.

    It listens to ``QStyleHints.colorSchemeChanged`` and, for platforms without that hint, to
    application palette changes; it emits only when the palette in force really changes.

    Signals:
        changed(object): the new :class:`Palette`.
    Methods:
        set_mode(mode): ``"system" | "light" | "dark"``; emits ``changed`` with the palette now in force.
        current() -> Palette.
    """

    changed = Signal(object)

    def __init__(self, mode: str = "system", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._mode = "system"
        self._last: Palette | None = None
        self.set_mode(mode, emit=False)
        app = _app()
        if app is not None:
            app.styleHints().colorSchemeChanged.connect(self._on_scheme_changed)
            # platforms without a colour-scheme hint change the application palette instead
            app.installEventFilter(self)

    @property
    def mode(self) -> str:
        return self._mode

    def current(self) -> Palette:
        return palette(self._mode)

    def set_mode(self, mode: str, emit: bool = True) -> None:
        if mode not in MODES:
            raise ValueError(f"theme must be one of {', '.join(MODES)}, got {mode!r}")
        self._mode = mode
        self._last = self.current()
        if emit:
            self.changed.emit(self._last)

    def _on_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self._mode == "system":
            self._emit_if_new()

    def _emit_if_new(self) -> None:
        pal = self.current()
        if pal is not self._last:
            self._last = pal
            self.changed.emit(pal)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ApplicationPaletteChange and self._mode == "system":
            self._emit_if_new()
        return False


def format_tokens(n: int | float | None) -> str:
    """``12,345``; ``—`` for unknown."""
    if n is None:
        return "—"
    return f"{round(n):,}"


def percent(part: int | float, whole: int | float) -> str:
    """``42.0%`` of ``whole``; ``—`` when ``whole`` is 0."""
    if not whole:
        return "—"
    return f"{100.0 * part / whole:.1f}%"
