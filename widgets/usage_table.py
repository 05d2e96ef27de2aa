"""The Usage view's tables: a column (its title, its text and its sort key from a record), a model of rows sorted
by a column's key (not its text), and :class:`UsageTable` — the sessions, projects, models and tools of the usage
report (:mod:`widgets.usage_view`), each row a record of plain values, its path (a session's file) in
:data:`PATH_ROLE`. The number formats every view shares: :func:`usd_text`, :func:`pct_text`, :func:`int_text`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QStyleOptionHeader,
    QTableView,
)

from engine.usage.costs import row_cost
from engine.usage.report import short_path
from widgets.formatting import format_usd

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
PATH_ROLE = Qt.ItemDataRole.UserRole + 2
Index = QModelIndex | QPersistentModelIndex
Record = Mapping[str, Any]
_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_ALIGN = int(Qt.ItemDataRole.TextAlignmentRole)
_TIP = int(Qt.ItemDataRole.ToolTipRole)
_SORT = int(SORT_ROLE)
_PATH = int(PATH_ROLE)
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
SIZED_ROWS = 100  # the rows a column's width fits (the ones in view first; Qt's default, 1000, costs ~0.1 s)


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def usd_text(value: Any, unpriced: Any = 0) -> str:
    """"$1.23", "$1.23+" when some calls have no price, "unknown" when none has one."""
    v = number(value)
    if v is None:
        return "unknown" if unpriced else ""
    return format_usd(v) + ("+" if unpriced else "")


def pct_text(value: Any) -> str:
    v = number(value)
    return "" if v is None else f"{100 * v:.0f} %"


def int_text(value: Any) -> str:
    v = number(value)
    return "" if v is None else f"{int(v):,}"


class Column:
    """A table column: its title; ``text(record)``, a cell's text; ``key(record)``, its sort key (no ``key``:
    the text, case folded); ``numeric``: numbers (right-aligned; a key that is no number, None, is "no
    value" and sorts last); ``tip``, the header's tooltip; ``cell_tip(record)``, a cell's tooltip."""

    __slots__ = ("cell_tip", "key", "numeric", "text", "tip", "title")

    def __init__(self, title: str, text: Callable[[Record], str], key: Callable[[Record], Any] | None = None,
                 *, numeric: bool = False, tip: str = "", cell_tip: Callable[[Record], str] | None = None) -> None:
        self.title, self.text, self.key, self.numeric, self.tip = title, text, key, numeric, tip
        self.cell_tip = cell_tip


def text_column(title: str, field: str, empty: str = "") -> Column:
    return Column(title, lambda r: str(r.get(field) or "") or empty)


def project_column(title: str = "Project") -> Column:
    """A project's folder: shown short, sorted and told in full (the tooltip)."""
    return Column(title, lambda r: short_path(str(r.get("project") or "")) or "(none)",
                  lambda r: str(r.get("project") or "").casefold(), cell_tip=lambda r: str(r.get("project") or ""))


def usd_column(title: str, field: str, unpriced: str | None = "unpriced_calls", tip: str = "") -> Column:
    return Column(title, lambda r: usd_text(r.get(field), r.get(unpriced) if unpriced else 0),
                  lambda r: number(r.get(field)), numeric=True, tip=tip)


def session_cost_column() -> Column:
    """A session's cost, its parts (main, subagents, compaction calls: engine.usage.costs.row_cost) in the
    cell's tooltip: the figure the window's status bar and Tools tab show for the same session."""
    column = usd_column("Cost", "cost_usd", tip="The session's calls, its subagents' and its compactions' own calls")
    column.cell_tip = lambda r: "\n".join(row_cost(r).lines()) if "main_calls" in r else ""
    return column


def int_column(title: str, field: str, tip: str = "") -> Column:
    return Column(title, lambda r: int_text(r.get(field)), lambda r: number(r.get(field)) or 0, numeric=True, tip=tip)


def pct_column(title: str, field: str) -> Column:
    return Column(title, lambda r: pct_text(r.get(field)), lambda r: number(r.get(field)), numeric=True)


class RowsModel(QAbstractTableModel):
    """Plain rows: a record of the report each (a dict), its cells' texts and sort keys made by the columns
    when first needed (10,000 sessions fill at once; the view asks for the rows it draws). The model sorts
    itself: by number (no value last, whichever the order) or by text, stable (ties keep the report's
    order); the chosen sort is kept when new records come. ``path`` names a record's session file (on the
    first column's PATH_ROLE and tooltip)."""

    def __init__(self, columns: Sequence[Column], path: str = "", parent: Any = None) -> None:
        super().__init__(parent)
        self.columns = tuple(columns)
        self._path_field = path
        self._records: list[Record] = []  # as the report gave them
        self._texts: list[tuple[str, ...] | None] = []  # their cells' texts, once drawn
        self._order: list[int] = []  # shown row -> record
        self.sort_column = -1
        self.sort_order = Qt.SortOrder.AscendingOrder

    # --- the data
    def set_records(self, records: Sequence[Record]) -> None:
        self.beginResetModel()
        self._records = list(records)
        self._texts = [None] * len(self._records)
        self._order = self._sorted(self.sort_column, self.sort_order)
        self.endResetModel()

    def _cells(self, i: int) -> tuple[str, ...]:
        texts = self._texts[i]
        if texts is None:
            record = self._records[i]
            texts = self._texts[i] = tuple(c.text(record) for c in self.columns)
        return texts

    def text(self, row: int, column: int) -> str:
        return self._cells(self._order[row])[column]

    def key(self, row: int, column: int) -> Any:
        i = self._order[row]
        key = self.columns[column].key
        return key(self._records[i]) if key is not None else self._cells(i)[column].lower()

    def path(self, row: int) -> str:
        return self._record_path(self._order[row])

    def tooltip(self, row: int, column: int) -> str:
        """A cell's tooltip ("" when its column has none)."""
        tip = self.columns[column].cell_tip
        return tip(self._records[self._order[row]]) if tip is not None else ""

    def _record_path(self, i: int) -> str:
        return str(self._records[i].get(self._path_field) or "") if self._path_field else ""

    def row_id(self, row: int) -> str:
        """What a row is across refreshes: its path, else its first column's text."""
        i = self._order[row]
        return self._record_path(i) or self._cells(i)[0]

    def find(self, row_id: str) -> int:
        """The shown row of that id, -1 when none."""
        for shown, i in enumerate(self._order):
            if (self._record_path(i) or self._cells(i)[0]) == row_id:
                return shown
        return -1

    # --- Qt
    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._order)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = _DISPLAY) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(self.columns):
            return None
        if role == _DISPLAY:
            return self.columns[section].title
        if role == _TIP:
            return self.columns[section].tip or None
        return None

    def data(self, index: Index, role: int = _DISPLAY) -> Any:
        row, c = index.row(), index.column()
        if not 0 <= row < len(self._order):
            return None
        if role == _DISPLAY:
            return self._cells(self._order[row])[c]
        if role == _ALIGN:
            return _RIGHT if self.columns[c].numeric else None
        if c == 0 and role in (_TIP, _PATH):
            path = self.path(row)
            if not path:
                return self.tooltip(row, c) or None if role == _TIP else None
            return path if role == _PATH else f"{self.text(row, 0)}\n{path}\n(double-click: open it read-only)"
        if role == _TIP:
            return self.tooltip(row, c) or None
        if role == _SORT:
            return self.key(row, c)
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        self.sort_column, self.sort_order = column, order
        if not self._records:
            return
        self.layoutAboutToBeChanged.emit()
        old = self._order
        self._order = self._sorted(column, order)
        persistent = self.persistentIndexList()
        if persistent:  # the selection, the current row: they follow their records
            shown = {i: row for row, i in enumerate(self._order)}
            self.changePersistentIndexList(persistent, [self.index(shown[old[p.row()]], p.column())
                                                        for p in persistent])
        self.layoutChanged.emit()

    def _sorted(self, column: int, order: Qt.SortOrder) -> list[int]:
        rows = list(range(len(self._records)))
        if not 0 <= column < len(self.columns):
            return rows
        descending = order == Qt.SortOrder.DescendingOrder
        key = self.columns[column].key
        if key is None:
            texts = [self._cells(i)[column].lower() for i in rows]
            rows.sort(key=texts.__getitem__, reverse=descending)
            return rows
        keys = [key(r) for r in self._records]
        if self.columns[column].numeric:
            valued = [i for i in rows if isinstance(keys[i], int | float)]
            valued.sort(key=keys.__getitem__, reverse=descending)
            return valued + [i for i in rows if not isinstance(keys[i], int | float)]
        rows.sort(key=lambda i: str(keys[i]), reverse=descending)
        return rows


class SortHeader(QHeaderView):
    """A header whose sort arrow points up when the smallest come first (ascending) and down when the largest do:
    QHeaderView gives the style the opposite (``SortDown`` for ascending), which Fusion draws as a down arrow."""

    def initStyleOptionForIndex(self, option: QStyleOptionHeader, logicalIndex: int) -> None:
        super().initStyleOptionForIndex(option, logicalIndex)
        if option.sortIndicator == QStyleOptionHeader.SortIndicator.SortDown:
            option.sortIndicator = QStyleOptionHeader.SortIndicator.SortUp
        elif option.sortIndicator == QStyleOptionHeader.SortIndicator.SortUp:
            option.sortIndicator = QStyleOptionHeader.SortIndicator.SortDown


class UsageTable(QTableView):
    """A read-only table of :class:`RowsModel` rows, sorted by ``sort`` at first; :meth:`set_records` keeps
    the user's sort, the selected row (by :meth:`RowsModel.row_id`) and the scroll position."""

    def __init__(self, columns: Sequence[Column], first_width: int = 160, *, path: str = "",
                 sort: tuple[int, Qt.SortOrder] = (1, Qt.SortOrder.DescendingOrder)) -> None:
        super().__init__()
        self.setHorizontalHeader(SortHeader(Qt.Orientation.Horizontal, self))
        self.rows = RowsModel(columns, path, self)
        self.setModel(self.rows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().hide()
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.setResizeContentsPrecision(SIZED_ROWS)
        header.resizeSection(0, first_width)
        header.setStretchLastSection(True)
        header.setSortIndicator(*sort)
        self.setSortingEnabled(True)  # sorts by the indicator: the model keeps it for the records to come

    def set_records(self, records: Sequence[Record]) -> None:
        selected = self.selected_id()
        bars = self.verticalScrollBar(), self.horizontalScrollBar()
        where = [b.value() for b in bars]
        self.rows.set_records(records)
        if selected:
            self.select_id(selected, scroll=False)
        self.doItemsLayout()  # the scroll bars' ranges, now
        for bar, value in zip(bars, where, strict=True):
            bar.setValue(value)

    def row_count(self) -> int:
        return self.rows.rowCount()

    def text(self, row: int, column: int) -> str:
        return self.rows.text(row, column)

    def path(self, row: int) -> str:
        return self.rows.path(row)

    def tooltip(self, row: int, column: int) -> str:
        return self.rows.tooltip(row, column)

    def sort_by(self, column: int, order: Qt.SortOrder) -> None:
        """As a click on the header does."""
        self.sortByColumn(column, order)

    def selected_id(self) -> str:
        rows = self.selectionModel().selectedRows()
        return self.rows.row_id(rows[0].row()) if rows else ""

    def select_id(self, row_id: str, scroll: bool = True) -> bool:
        """Select the row of that id (a session's path; else the first column's text)."""
        row = self.rows.find(row_id)
        if row < 0:
            return False
        index = self.rows.index(row, 0)
        flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        self.selectionModel().setCurrentIndex(index, flags)
        if scroll:
            self.scrollTo(index)
        return True


__all__ = ["PATH_ROLE", "SORT_ROLE", "Column", "Record", "RowsModel", "SortHeader", "UsageTable", "int_column",
           "int_text", "number", "pct_column", "pct_text", "project_column", "session_cost_column", "text_column",
           "usd_column", "usd_text"]
