"""The "Tools" tab: the tokens each tool put into the session and what it cost (:class:`ToolsPanel`).

A table of the tools — calls, argument tokens, result tokens, share of the session's history, and two
dollar figures at litellm's prices: ``Calls $`` (the provider calls whose response called the tool) and
``Context $`` (carrying its calls and results in the prompts; estimated; the two overlap) — sortable by
any column (a click on its header), with a line of totals above it; and the largest tool results, each a
link to its message: double-click (or Enter) emits ``message_activated(str)`` (the window scrolls the
chat there); a result that a compaction archived also emits ``archived_message_requested(day, id)``
(the inspector shows it in the Archive tab). The figures are :class:`engine.context.attribution.Attribution`'s
and :class:`engine.usage.tool_costs.ToolCosts`' (what ``ctxbench tools`` prints), computed by the service
off the loop thread. A cost that cannot be known is ``?`` (its tooltip says why), never $0; ``+`` marks
a lower bound (some of the calls behind it have no price).

For an imported session, a third section lists what every request carried before the messages —
the system prompt's tokens and the tool definitions, largest first, grouped as Claude Code's
``/context`` groups them (built-in tools, then one group per MCP server with its total) — and says
whether those figures were read from the file (as sent) or inferred (:meth:`ToolsPanel.set_definitions`,
an :class:`engine.workbench.imported.ImportFacts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets.formatting import format_usd
from widgets.theme import format_tokens

if TYPE_CHECKING:
    from engine.context.attribution import Attribution
    from engine.usage.tool_costs import ToolCost, ToolCosts
    from engine.workbench.imported import ImportFacts

EMPTY_TEXT = "No tool calls in this session"
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
CALLS_TIP = ("What the provider calls whose response called this tool cost at litellm's prices (a response "
             "calling several tools is split evenly over its tool calls).")
CONTEXT_TIP = ("Estimated cost of carrying this tool's calls and results in the prompts (each call's input cost "
               "shared by tokens); it overlaps Calls $, so the two are not to be added.")
NO_CALLS = "no provider call of this session was recorded: nothing to price"


def _table(cols: tuple[str, ...]) -> QTableWidget:
    table = QTableWidget(0, len(cols))
    table.setHorizontalHeaderLabels(list(cols))
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    return table


def _cell(text: str, right: bool = False, tip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if right:
        item.setTextAlignment(RIGHT)
    if tip:
        item.setToolTip(tip)
    return item


class _SortItem(QTableWidgetItem):
    """A cell that sorts by its number (SORT_ROLE; an unknown one below every number) or else its text."""

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(SORT_ROLE), other.data(SORT_ROLE)
        if isinstance(a, int | float) or isinstance(b, int | float):
            return (a if isinstance(a, int | float) else float("-inf")) < (
                b if isinstance(b, int | float) else float("-inf"))
        return self.text().lower() < other.text().lower()


def _sort_cell(text: str, key: float | None, right: bool = True, tip: str = "") -> QTableWidgetItem:
    item = _SortItem(text)
    item.setData(SORT_ROLE, key)
    if right:
        item.setTextAlignment(RIGHT)
    if tip:
        item.setToolTip(tip)
    return item


def usd_cell_text(usd: float | None, unpriced: int) -> str:
    """"$0.0123" (the status bar's and the Usage view's format), "$0.0123+" when some calls behind it
    have no price (a lower bound), "?" when none has one."""
    return "?" if usd is None else format_usd(usd) + ("+" if unpriced else "")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _cost_cells(tc: ToolCost | None, costs: ToolCosts | None) -> tuple[QTableWidgetItem, QTableWidgetItem]:
    """The Calls $ and Context $ cells of one tool (``tc`` None: the session's calls cannot be priced)."""
    if tc is None or costs is None:
        return (_sort_cell("?", None, tip=f"Unknown: {NO_CALLS}"), _sort_cell("?", None, tip=f"Unknown: {NO_CALLS}"))
    why = costs.total.problem or "no price"
    calls_tip = f"{_plural(tc.responses, 'response')} called it"
    if tc.calls_usd is None:
        calls_tip = f"Unknown: none of the {_plural(tc.responses, 'response')} that called it has a price ({why})"
    elif tc.unpriced_responses:
        calls_tip += f"; {tc.unpriced_responses:,} of them without a price ({why}): a lower bound"
    context_tip = f"Carried in {_plural(tc.prompts, 'prompt')} (estimated)"
    if tc.context_usd is None:
        context_tip = f"Unknown: none of the {_plural(tc.prompts, 'prompt')} that carried it has a price ({why})"
    elif tc.unpriced_prompts:
        context_tip += f"; {tc.unpriced_prompts:,} of them without a price or a prompt size: a lower bound"
    return (_sort_cell(usd_cell_text(tc.calls_usd, tc.unpriced_responses), tc.calls_usd, tip=calls_tip),
            _sort_cell(usd_cell_text(tc.context_usd, tc.unpriced_prompts), tc.context_usd, tip=context_tip))


def _pct(part: float | None, whole: float | None) -> str:
    return "?" if part is None or not whole else f"{part / whole * 100:.0f}%"


def costs_text(costs: ToolCosts | None) -> tuple[str, str]:
    """The line of totals above the tools table and its tooltip (what ``ctxbench tools``' "cost by tool"
    line says, shorter)."""
    if costs is None or not costs.total.calls:
        return "Cost by tool: ?", f"Unknown: {NO_CALLS}"
    total = costs.total
    why = total.problem or "no price"
    if total.usd is None:
        return "Cost by tool: ?", f"Unknown: none of the session's {_plural(total.calls, 'call')} has a price ({why})"
    plus = "+" if total.unpriced else ""
    session = costs.session
    whole = session.total if session is not None else total
    of = "the session's" if whole.calls == total.calls else "the main calls'"
    head = ""
    if whole.calls != total.calls and session is not None:  # subagents' and compactions' calls call no tool here
        head = f"Session {usd_cell_text(whole.usd, whole.unpriced + whole.partial)} ({session.breakdown()}) · "
    text = (f"{head}Cost by tool: Calls $ {usd_cell_text(costs.calls_usd, total.unpriced)} = "
            f"{_pct(costs.calls_usd, total.usd)} of {of} {format_usd(total.usd)}{plus} "
            f"({_plural(costs.no_tool_responses, 'response')} without a tool call: "
            f"{usd_cell_text(costs.no_tool_usd, total.unpriced)}) · Context $ "
            f"{usd_cell_text(costs.context_usd, total.unpriced)} = {_pct(costs.context_usd, costs.prompt_usd)} of the "
            f"{usd_cell_text(costs.prompt_usd, total.unpriced)} input cost (estimated; overlaps Calls $)")
    tips = ["At litellm's prices, from each call's usage as the agent recorded it.",
            "Calls $: the responses that called a tool; with the responses without a tool call they make the "
            "session's total.",
            "Context $: the tools' calls and results carried in the prompts, a share of the input cost "
            "(estimated); the two overlap and are not to be added."]
    if session is not None:
        tips += session.lines()
    if total.unpriced:
        tips.append(f"{total.unpriced:,} of the {_plural(total.calls, 'call')} without a price ({why}): "
                    "the figures marked + are lower bounds.")
    if costs.scaled_calls:
        tips.append(f"{_plural(costs.scaled_calls, 'call')} whose estimated tool tokens exceeded the provider's "
                    "prompt: their shares were scaled down to it.")
    return text, "\n".join(tips)


class ToolsPanel(QWidget):
    """Tokens by tool and the largest tool results (see the module docstring)."""

    message_activated = Signal(str)
    archived_message_requested = Signal(str, str)  # day, message id

    TOOL_COLS = ("Tool", "Calls", "Arg tokens", "Result tokens", "Share", "Calls $", "Context $")
    CALLS_USD_COL, CONTEXT_USD_COL = 5, 6
    RESULT_COLS = ("Tokens", "Tool", "Where", "First line")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.label = QLabel("Open a session to see the tokens by tool")
        self.label.setWordWrap(True)
        layout.addWidget(self.label)
        self.cost_label = QLabel()
        self.cost_label.setWordWrap(True)
        self.cost_label.hide()
        layout.addWidget(self.cost_label)
        self.table = _table(self.TOOL_COLS)
        for col, tip in ((2, "Tokens of the tool's call arguments (estimated)"),
                         (3, "Tokens of the tool's results (estimated)"),
                         (4, "The tool's calls and results as a share of the session's history tokens"),
                         (self.CALLS_USD_COL, CALLS_TIP), (self.CONTEXT_USD_COL, CONTEXT_TIP)):
            head = self.table.horizontalHeaderItem(col)
            if head is not None:
                head.setToolTip(tip)
        header = self.table.horizontalHeader()
        header.setStretchLastSection(False)  # the tool's name gives way (elided, whole in its tooltip)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSortIndicator(-1, Qt.SortOrder.DescendingOrder)  # as the attribution orders them until a click
        self.table.setSortingEnabled(True)
        self.results_label = QLabel("Largest tool results (double-click: show the message)")
        self.results = _table(self.RESULT_COLS)
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        lower_layout.addWidget(self.results_label)
        lower_layout.addWidget(self.results, 1)
        self.definitions_pane = QWidget()
        defs_layout = QVBoxLayout(self.definitions_pane)
        defs_layout.setContentsMargins(0, 0, 0, 0)
        self.definitions_label = QLabel()
        self.definitions_label.setWordWrap(True)
        self.definitions = QTreeWidget()
        self.definitions.setColumnCount(3)
        self.definitions.setHeaderLabels(["Sent with every request", "Tokens", "Share"])
        self.definitions.setUniformRowHeights(True)
        self.definitions.setAlternatingRowColors(True)
        header = self.definitions.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        defs_layout.addWidget(self.definitions_label)
        defs_layout.addWidget(self.definitions, 1)
        self.definitions_pane.hide()
        self.split = split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        split.addWidget(self.definitions_pane)
        for i, stretch in enumerate((2, 2, 3)):
            split.setStretchFactor(i, stretch)
        layout.addWidget(split, 1)
        self.facts: ImportFacts | None = None
        self.attribution: Attribution | None = None
        self.costs: ToolCosts | None = None
        self._links: list[tuple[str, str]] = []  # per result row: (message id, "live" | archive day)
        self.results.cellDoubleClicked.connect(lambda row, _col: self.activate_result(row))
        self.results.cellActivated.connect(lambda row, _col: self.activate_result(row))

    def clear(self) -> None:
        """Forget the attribution (the definitions stay until the next set_definitions)."""
        self.attribution = None
        self.costs = None
        self._links = []
        self.table.setRowCount(0)
        self.results.setRowCount(0)
        self.label.setText("Open a session to see the tokens by tool")
        self.cost_label.setText("")
        self.cost_label.hide()

    def set_attribution(self, attribution: Attribution, locations: Mapping[str, str] | None = None,
                        costs: ToolCosts | None = None) -> None:
        """Show ``attribution``; ``locations``: message id → "live" or the archive day that holds it;
        ``costs``: the cost by tool (None: unknown, every cost is "?")."""
        self.attribution = attribution
        self.costs = costs
        where = dict(locations or {})
        calls = sum(t.calls for t in attribution.tools)
        if attribution.tools:
            self.label.setText(
                f"{calls:,} tool call{'s' if calls != 1 else ''} · {format_tokens(attribution.tool_tokens)} tokens "
                f"from tools = {attribution.tool_share * 100:.1f}% of the session's "
                f"{format_tokens(attribution.history_tokens)} ({attribution.messages:,} messages, "
                "those compacted away included; estimated)")
        else:
            self.label.setText(EMPTY_TEXT)
        text, tip = costs_text(costs)
        self.cost_label.setText(text)
        self.cost_label.setToolTip(tip)
        self.cost_label.setVisible(bool(attribution.tools))
        self.table.setSortingEnabled(False)  # rows filled in the attribution's order, then sorted as chosen
        self.table.setRowCount(len(attribution.tools))
        for row, t in enumerate(attribution.tools):
            tc = costs.of(t.tool) if costs is not None and costs.total.calls else None
            cells = [_sort_cell(t.tool, None, right=False, tip=t.tool),
                     _sort_cell(f"{t.calls:,}", t.calls, tip=f"{t.results:,} results"),
                     _sort_cell(format_tokens(t.argument_tokens), t.argument_tokens),
                     _sort_cell(format_tokens(t.result_tokens), t.result_tokens),
                     _sort_cell(f"{t.share * 100:.1f}%", t.share), *_cost_cells(tc, costs)]
            for col, item in enumerate(cells):
                self.table.setItem(row, col, item)
        self.table.setSortingEnabled(True)
        self.results.setRowCount(len(attribution.largest))
        self._links = []
        for row, r in enumerate(attribution.largest):
            place = where.get(r.message_id, "live")
            self._links.append((r.message_id, place))
            label = "in the context" if place == "live" else f"archived {place}"
            cells = [_cell(format_tokens(r.tokens), True), _cell(r.tool), _cell(label),
                     _cell(r.first_line, tip=f"message #{r.index + 1} · {r.message_id}")]
            for col, item in enumerate(cells):
                self.results.setItem(row, col, item)

    def set_definitions(self, facts: ImportFacts | None) -> None:
        """The system prompt and tool definitions of an imported session (hidden when None or unknown)."""
        self.facts = facts
        self.definitions.clear()
        if facts is None or not facts.has_prefix:
            self.definitions_label.setText("")
            self.definitions_pane.hide()
            return
        self.definitions_label.setText(definitions_text(facts))
        self.definitions_label.setToolTip(facts.prefix_label)
        total = ((facts.system_prompt_tokens or 0) + facts.tool_tokens) or facts.inferred_prefix_tokens or 0

        def share(tokens: int) -> str:
            return f"{tokens / total * 100:.1f}%" if total else ""

        def row(parent: QTreeWidget | QTreeWidgetItem, name: str, tokens: int | None, tip: str = "") -> QTreeWidgetItem:
            item = QTreeWidgetItem(parent, [name, "" if tokens is None else format_tokens(tokens),
                                            "" if tokens is None else share(tokens)])
            for col in (1, 2):
                item.setTextAlignment(col, RIGHT)
            if tip:
                item.setToolTip(0, tip)
            return item

        if facts.system_prompt_tokens is not None:
            row(self.definitions, "System prompt", facts.system_prompt_tokens, facts.prefix_label)
        elif facts.inferred_prefix_tokens is not None:
            row(self.definitions, "System prompt and tool definitions (together)", facts.inferred_prefix_tokens,
                facts.prefix_label)
        for group in facts.groups:
            head = row(self.definitions, f"{group.label} ({len(group.tools)})", group.tokens)
            font = head.font(0)
            font.setBold(True)
            head.setFont(0, font)
            prefix = f"mcp__{group.server}__" if group.server else ""
            for tool in group.tools:
                short = tool.name[len(prefix):] if prefix and tool.name.startswith(prefix) else tool.name
                row(head, short, tool.tokens, tool.name if short != tool.name else "")
            head.setExpanded(True)
        if self.definitions_pane.isHidden():
            self.definitions_pane.show()
            total_h = sum(self.split.sizes())
            if total_h > 0:  # a third of the height for the tables each… the definitions a little more
                self.split.setSizes([total_h * 2 // 7, total_h * 2 // 7, total_h - 4 * total_h // 7])
        # no taller than its rows need (a single "together" row leaves the tables the room)
        self.definitions_pane.setMaximumHeight(self._definitions_height())

    def _definitions_height(self) -> int:
        """The height the definitions pane needs to show its label and every row."""
        tree = self.definitions
        rows = len(self.definition_rows())
        row_h = max(tree.sizeHintForRow(0), tree.fontMetrics().height() + 4) if rows else 0
        label_h = self.definitions_label.heightForWidth(max(self.width() - 8, 300))
        label_h = label_h if label_h > 0 else self.definitions_label.sizeHint().height()
        return label_h + tree.header().sizeHint().height() + rows * row_h + 2 * tree.frameWidth() + 16

    def definition_rows(self) -> list[list[str]]:
        """Every row of the definitions tree, depth first, each its three texts (tests, accessibility)."""
        out: list[list[str]] = []

        def walk(item: QTreeWidgetItem, depth: int) -> None:
            out.append(["  " * depth + item.text(0), item.text(1), item.text(2)])
            for i in range(item.childCount()):
                child = item.child(i)
                if child is not None:
                    walk(child, depth + 1)

        for i in range(self.definitions.topLevelItemCount()):
            top = self.definitions.topLevelItem(i)
            if top is not None:
                walk(top, 0)
        return out

    def tool_row(self, row: int) -> list[str]:
        """The texts of one tool row (tests, accessibility)."""
        return [(self.table.item(row, c) or QTableWidgetItem()).text() for c in range(self.table.columnCount())]

    def result_link(self, row: int) -> tuple[str, str]:
        """(message id, "live" | archive day) of a largest-result row."""
        return self._links[row]

    def activate_result(self, row: int) -> None:
        """Follow the link of a largest-result row (what a double-click does)."""
        if not 0 <= row < len(self._links):
            return
        message_id, place = self._links[row]
        if not message_id:
            return
        if place != "live":
            self.archived_message_requested.emit(place, message_id)
        self.message_activated.emit(message_id)


def definitions_text(facts: ImportFacts) -> str:
    """"System prompt 2,833 + 12 tool definitions 9,876 = 12,709 tokens in every request — from the file
    (as sent)"; for an inferred prefix, its size together and that it is inferred."""
    where = facts.prefix_label
    if facts.system_prompt_tokens is None and not facts.groups:
        n = facts.inferred_prefix_tokens or 0
        return f"System prompt and tool definitions: {format_tokens(n)} tokens in every request — {where}"
    parts = []
    if facts.system_prompt_tokens is not None:
        parts.append(f"System prompt {format_tokens(facts.system_prompt_tokens)}")
    n = len(facts.tools)
    if n:
        parts.append(f"{n:,} tool definition{'s' if n != 1 else ''} {format_tokens(facts.tool_tokens)}")
    total = (facts.system_prompt_tokens or 0) + facts.tool_tokens
    text = " + ".join(parts) + (f" = {format_tokens(total)}" if len(parts) > 1 else "") + " tokens in every request"
    return text + (f" — {where}" if where else "")


__all__ = ["ToolsPanel", "costs_text", "definitions_text", "usd_cell_text"]
