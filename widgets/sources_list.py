"""The Sources list: the agent sessions on this machine, grouped by agent then project, newest first.

Each row: the first prompt (or the session id), how long ago it was active, how full its window is,
what it cost (the agent's own cost records, when its file has them: Claude Code 2.1.3xx); a session
being written now is marked "● live". Rows are :class:`engine.workbench.rows.SourceRow` (``agent``, ``project``,
``session_id``, ``path``, ``title``, ``last_activity``, ``percent_full``, ``agent_cost_usd``, ``live``…).

Public API of :class:`SourcesList`
----------------------------------
Signals:
    source_opened(object)        path (a str): show it (double-click, Enter, or Open in the menu)
    continue_requested(object)   path (a str): fork it into a ctxbench session (context menu)
    refresh_requested()
Methods:
    set_known(places, cost_from) where it looks, named when nothing is found ((agent, place) pairs), and the agents
                                 whose own cost the Cost column shows (its tooltip)
    set_sources(rows)            replace the rows (grouping kept, the selection too)
    set_problems(problems)       the files the scan could not read (ProblemRow: path, shown, reason): "N files could
                                 not be read" under the list, each path and reason in its tooltip
    set_current(path)            select without emitting
    paths() -> list[str]         in display order (tests)
    item_for(path)               the row's item (tests)
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.workbench.rows import ProblemRow, SourceRow
from widgets.formatting import cost_tooltip, format_usd, local_datetime

PATH_ROLE = Qt.ItemDataRole.UserRole + 1
LIVE = QColor("#2e9d4f")
PROBLEMS_SHOWN = 40  # files named in the tooltip of "N files could not be read" (then "and N more")


def age(ts: Any, now: datetime | None = None) -> str:
    """``5 min``, ``3 h``, ``2 d`` since ``ts`` (iso); "" when unknown."""
    dt = local_datetime(ts)
    if dt is None:
        return ""
    seconds = ((now or datetime.now(UTC)) - dt).total_seconds()
    if seconds < 60:
        return "now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return ""


def short_usd(value: float) -> str:
    """A cost for a narrow column: "$0.09", "$12.34", "$1,234"; "<$0.01" for less than a cent."""
    if 0 < value < 0.005:
        return "<$0.01"
    return f"${value:,.0f}" if value >= 1000 else f"${value:,.2f}"


def path_key(path: str) -> str:
    """``path`` as a Qt string holds it: a file name's bytes that are not UTF-8 (lone surrogates in Python, which
    Qt drops) escaped. The list keeps the path itself beside it (what it emits and returns)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = path.encode("utf-8", "surrogateescape")  # the name's own bytes (as the file system gave them)
        except UnicodeEncodeError:
            raw = path.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "backslashreplace")
    return path


def _children(item: QTreeWidgetItem) -> list[QTreeWidgetItem]:
    return [c for c in (item.child(i) for i in range(item.childCount())) if c is not None]


class SourcesList(QWidget):
    """See the module docstring."""

    # object, not str: a path is passed on whole (a Qt string would drop the bytes of a name that are not UTF-8)
    source_opened = Signal(object)
    continue_requested = Signal(object)
    refresh_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(4)
        self.tree.setHeaderLabels(["Session", "Age", "Full", "Cost"])
        self.tree.headerItem().setToolTip(3, "The agent's own cost in USD, from its cost records")
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(True)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        layout.addWidget(self.tree, 1)
        self.empty_label = QLabel("No agent sessions found")  # (where it looked: set_known)
        self.empty_label.setWordWrap(True)
        layout.addWidget(self.empty_label)
        self.problems_label = QLabel()
        self.problems_label.setWordWrap(True)
        self.problems_label.setStyleSheet("color: #b26a00;")
        self.problems_label.hide()
        layout.addWidget(self.problems_label)
        self._problems: list[ProblemRow] = []
        row = QHBoxLayout()
        self.open_button = QPushButton("Open")
        self.refresh_button = QPushButton("Refresh")
        row.addWidget(self.open_button)
        row.addWidget(self.refresh_button)
        layout.addLayout(row)
        self._suppress = False
        self._paths: dict[str, str] = {}  # path_key -> the path as the row gave it
        self.tree.itemActivated.connect(self._on_activated)
        self.tree.customContextMenuRequested.connect(self._on_menu)
        self.open_button.clicked.connect(self._open_current)
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.set_sources([])

    # --- data
    def set_known(self, places: Sequence[tuple[str, str]], cost_from: str) -> None:
        """What the list says of where it looks and whose cost it shows: ``places`` (agent, where a person finds its
        sessions) named when no session is found; ``cost_from``, the agents whose files hold their own cost (the
        Cost column's tooltip)."""
        where = "".join(f"\n{agent}: {shown}" for agent, shown in places)
        self.empty_label.setText(f"No agent sessions found. Sources looks in:{where}" if where
                                 else "No agent sessions found")
        self.tree.headerItem().setToolTip(3, "The agent's own cost in USD, from its cost records"
                                          + (f" ({cost_from})" if cost_from else ""))

    def set_sources(self, rows: Sequence[SourceRow]) -> None:
        current = self.current_path()
        expanded = {g.text(0) for g in _children(self.tree.invisibleRootItem()) if g.isExpanded()}
        self._suppress = True
        self.tree.clear()
        self._paths = {}
        groups: dict[str, QTreeWidgetItem] = {}
        projects: dict[tuple[str, str], QTreeWidgetItem] = {}
        now = datetime.now(UTC)
        for r in rows:  # newest first as given: groups appear in the order of their newest session
            agent = r.agent
            if agent not in groups:
                groups[agent] = QTreeWidgetItem(self.tree, [r.agent_name or agent])
                self._bold(groups[agent])
            key = (agent, r.project or "(no project)")
            if key not in projects:
                projects[key] = QTreeWidgetItem(groups[agent], [path_key(key[1])])  # a folder's name
            self._row(QTreeWidgetItem(projects[key]), r, now)
        for item in groups.values():
            item.setExpanded(not expanded or item.text(0) in expanded)
            for project in _children(item):
                project.setExpanded(True)
        self._suppress = False
        if current:
            self.set_current(current)
        self.empty_label.setVisible(not rows)
        self.open_button.setEnabled(bool(rows))

    def set_problems(self, problems: Sequence[ProblemRow]) -> None:
        """The files the scan could not read: a line under the list, each file's path and reason in its
        tooltip (none: the line is hidden)."""
        self._problems = list(problems)
        n = len(self._problems)
        self.problems_label.setVisible(bool(n))
        if not n:
            self.problems_label.clear()
            self.problems_label.setToolTip("")
            return
        self.problems_label.setText(f"⚠ {n} file{'s' if n != 1 else ''} could not be read (left out; hover for why)")
        lines = [f"{p.shown or p.path}: {p.reason}" for p in self._problems[:PROBLEMS_SHOWN]]
        if n > PROBLEMS_SHOWN:
            lines.append(f"… and {n - PROBLEMS_SHOWN} more")
        # rich text built here, the file names escaped: a name is never read as markup
        self.problems_label.setToolTip("<qt>" + "<br>".join(html.escape(line) for line in lines) + "</qt>")

    def problems(self) -> list[ProblemRow]:
        return list(self._problems)

    @staticmethod
    def _bold(item: QTreeWidgetItem) -> None:
        f = QFont(item.font(0))
        f.setBold(True)
        item.setFont(0, f)

    def _row(self, item: QTreeWidgetItem, r: SourceRow, now: datetime) -> None:
        title = r.title or r.session_id
        live = r.live
        item.setText(0, ("● " if live else "") + title)
        item.setText(1, "live" if live else age(r.last_activity or r.started, now))
        full = r.percent_full
        item.setText(2, "" if full is None else f"{float(full):.0f} %")
        item.setTextAlignment(2, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        cost = r.agent_cost_usd
        item.setText(3, "" if cost is None else short_usd(cost))
        item.setTextAlignment(3, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        item.setToolTip(3, cost_tooltip(cost))
        path = r.path
        key = path_key(path)
        self._paths[key] = path
        item.setData(0, PATH_ROLE, key)
        tokens = r.last_prompt_tokens
        window = r.window
        figures = f"{tokens:,} of {window:,} tokens" if tokens is not None and window else ""
        spent = f"the agent's own cost {format_usd(cost)}" if cost is not None else ""
        item.setToolTip(0, "\n".join(s for s in (title, r.model, figures, f"{r.calls} calls", spent, key) if s))
        if live:
            for col in (0, 1):
                item.setForeground(col, QBrush(LIVE))

    def _items(self) -> list[QTreeWidgetItem]:
        return [row for group in _children(self.tree.invisibleRootItem()) for project in _children(group)
                for row in _children(project)]

    def paths(self) -> list[str]:
        return [self._path(item) for item in self._items()]

    def item_for(self, path: str) -> QTreeWidgetItem | None:
        key = path_key(path)
        return next((i for i in self._items() if i.data(0, PATH_ROLE) == key), None)

    def _path(self, item: QTreeWidgetItem | None) -> str:
        key = str(item.data(0, PATH_ROLE) or "") if item is not None else ""
        return self._paths.get(key, key)

    def current_path(self) -> str:
        return self._path(self.tree.currentItem())

    def set_current(self, path: str) -> None:
        item = self.item_for(path)
        if item is not None:
            self._suppress = True
            self.tree.setCurrentItem(item)
            self._suppress = False

    # --- slots
    def _on_activated(self, item: QTreeWidgetItem, _column: int) -> None:
        path = self._path(item)
        if path and not self._suppress:
            self.source_opened.emit(path)

    def _open_current(self) -> None:
        path = self.current_path()
        if path:
            self.source_opened.emit(path)

    def _on_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        menu = QMenu(self)
        path = self._path(item)
        if path:
            menu.addAction("Open (read-only)", lambda: self.source_opened.emit(path))
            menu.addAction("Continue in ctxbench", lambda: self.continue_requested.emit(path))
            menu.addSeparator()
        menu.addAction("Refresh", self.refresh_requested.emit)
        menu.popup(self.tree.viewport().mapToGlobal(pos))
        self._menu = menu


__all__ = ["PROBLEMS_SHOWN", "SourcesList", "age", "path_key", "short_usd"]
