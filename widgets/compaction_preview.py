"""The compaction preview: see what a compaction would do before it happens, edit it, apply or discard.

Non-modal: the app shows it with ``open()``/``show()`` and listens to its signals — never ``exec()``
(a nested event loop inside an async slot breaks qasync).

Layout: the before/after stacked bars side by side (same region colours as the context chart, drawn
against the same window scale), the plan (every history message marked *compacted* or *kept* with its
tokens), the generated summary in an editor with "Regenerate" and an instruction field, and
Apply / Discard. While the summary is being generated, a busy bar with Cancel replaces the buttons.

Public API of :class:`CompactionPreview`
----------------------------------------
Signals:
    apply_requested(str)        the (possibly edited) summary to apply
    discard_requested()         Discard, Esc or the window's close button (emitted once per plan)
    regenerate_requested(str)   regenerate the summary with this instruction ("" = none)
    cancel_requested()          cancel the running summary call
    summary_edited(str)         the user edited the summary (debounced) — the app may answer with
                                set_after(snapshot) to update the "after" bar
Methods:
    set_plan(before, after, compacted, kept, tokens_by_id=None, instruction="")
        before/after: ContextSnapshot (after None while computing); compacted/kept: message dicts
    set_after(after)            update the "after" bar only
    set_summary(text)           the generated summary (replaces the editor text; not an edit)
    summary() -> str
    set_busy(busy, text="Generating the summary…", apply_allowed=False)
                                with ``apply_allowed`` the summary shown (the digest) can be edited and
                                applied while the model writes (Cancel stops the model)
    set_mode(label)             how the summary is made ("digest — no model", …)
    set_costs(text)             what each part of the summary cost (tokens, time)
    show_summary_parts(summary) set_mode + set_costs from an engine.context.summaries.Summary, and the model's
                                reply apart (read-only, under the editor) when it is not used
    show_problem(plan, summary) the reason the plan or summary cannot be applied as shown
    set_model_text(text)        the model's part arrived: replaces the editor text unless the user
                                edited it meanwhile (then a note says so); returns whether it replaced
    set_error(text)             a reason shown above the buttons ("" clears)
    instruction() -> str
    plan_rows() -> list[tuple[str, str, int]]   (status, role, tokens) per plan row (tests)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QColor, QFont, QFontMetrics, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.context.summaries import Summary, mode_label
from engine.model.compaction_change import CompactionChange, compaction_change
from engine.model.messages import preview
from engine.model.snapshot import ContextSnapshot
from widgets.theme import REGION_LABELS, REGION_ORDER, Palette, format_tokens, palette, percent


@dataclass(frozen=True)
class _Scale:
    """Tokens → y in the bars' area: ``bottom`` is 0 tokens, ``height`` pixels hold ``max_tokens``."""

    bottom: float
    height: float
    max_tokens: float

    def y_of(self, tokens: float) -> float:
        return self.bottom - self.height * tokens / self.max_tokens


class StackedBars(QWidget):
    """Vertical stacked bars drawn with QPainter, on one shared token scale, with threshold/limit lines."""

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self._pal = pal or palette()
        self._bars: list[tuple[str, ContextSnapshot | None]] = []
        self.setMinimumSize(QSize(300, 220))

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.update()

    def set_bars(self, bars: Sequence[tuple[str, ContextSnapshot | None]]) -> None:
        self._bars = list(bars)
        self.update()

    def bars(self) -> list[tuple[str, ContextSnapshot | None]]:
        return list(self._bars)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        pal = self._pal
        p.fillRect(self.rect(), QColor(pal.background))
        snaps = [s for _, s in self._bars if s is not None]
        if not snaps:
            p.setPen(QColor(pal.muted))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No plan yet")
            p.end()
            return
        scale_max = max(max(s.window, sum(v for k, v in s.detailed_regions().items() if k != "free")) for s in snaps)
        fm = QFontMetrics(self.font())
        top = fm.height() + 8
        bottom = self.height() - 2 * fm.height() - 10
        scale = _Scale(bottom, max(10, bottom - top), max(1, scale_max))
        left = 8
        right = self.width() - 8
        slot = (right - left) / max(1, len(self._bars))
        bar_w = min(110.0, slot * 0.38)
        for i, (label, s) in enumerate(self._bars):
            x0 = left + slot * i + slot * 0.12
            p.setPen(QColor(pal.text))
            col = QRectF(x0 - 40, 0, bar_w + 80, 0)  # text centred under/over the bar
            title_rect = QRectF(col.left(), 2, col.width(), fm.height() + 4)
            p.drawText(title_rect, Qt.AlignmentFlag.AlignCenter, label)
            if s is None:
                p.setPen(QColor(pal.muted))
                p.drawText(QRectF(left + slot * i, top, slot, scale.height), Qt.AlignmentFlag.AlignCenter,
                           "computing…")
                continue
            label_x = x0 + bar_w + 6
            label_w = max(0.0, left + slot * (i + 1) - label_x - 4)
            self._paint_bar(p, scale, s, QRectF(x0, 0, bar_w, 0), QRectF(label_x, 0, label_w, 0))
            self._paint_caption(p, fm, s, QRectF(col.left(), bottom + 4, col.width(), fm.height() + 2))
        p.end()

    def _paint_bar(self, p: QPainter, scale: _Scale, s: ContextSnapshot, bar: QRectF, labels: QRectF) -> None:
        """One stacked bar (regions bottom-up, the larger ones labelled beside it), its frame and its
        threshold and window lines. ``bar`` and ``labels`` give the x and the width."""
        pal = self._pal
        x0, bar_w, label_x, label_w = bar.left(), bar.width(), labels.left(), labels.width()
        acc = 0.0
        regions = s.detailed_regions()
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
        sfm = QFontMetrics(small)
        for key in REGION_ORDER:
            v = regions[key]
            if v <= 0:
                continue
            y1 = scale.y_of(acc)
            y2 = scale.y_of(acc + v)
            p.fillRect(QRectF(x0, y2, bar_w, y1 - y2), QColor(pal.regions[key]))
            if y1 - y2 >= sfm.height() and label_w > 40:
                # label the larger regions beside the bar
                p.setFont(small)
                p.setPen(QColor(pal.muted))
                name = REGION_LABELS[key].replace("History · ", "")
                text = sfm.elidedText(f"{format_tokens(v)} {name}", Qt.TextElideMode.ElideRight, int(label_w))
                p.drawText(QRectF(label_x, (y1 + y2) / 2 - sfm.height() / 2, label_w, sfm.height()),
                           Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
                p.setFont(self.font())
            acc += v
        p.setPen(QPen(QColor(pal.border), 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        top = scale.y_of(max(acc, s.window))
        p.drawRect(QRectF(x0, top, bar_w, scale.bottom - top))
        # threshold and window lines
        for value, color, style in (
            (s.threshold_tokens, pal.threshold, Qt.PenStyle.DashLine),
            (s.window, pal.limit, Qt.PenStyle.SolidLine),
        ):
            pen = QPen(QColor(color), 2)
            pen.setStyle(style)
            p.setPen(pen)
            y = scale.y_of(value)
            p.drawLine(int(x0 - 10), int(y), int(x0 + bar_w + 10), int(y))

    def _paint_caption(self, p: QPainter, fm: QFontMetrics, s: ContextSnapshot, rect: QRectF) -> None:
        """Under a bar: the prompt's size, then the share of the window used."""
        used = sum(v for k, v in s.detailed_regions().items() if k != "free")
        p.setPen(QColor(self._pal.text))
        p.drawText(rect, Qt.AlignmentFlag.AlignCenter, f"prompt {format_tokens(s.prompt)}")
        p.setPen(QColor(self._pal.muted))
        p.drawText(rect.translated(0, fm.height()), Qt.AlignmentFlag.AlignCenter,
                   f"{percent(used, s.window)} of {format_tokens(s.window)}")


class CompactionPreview(QDialog):
    """Preview of a compaction (see the module docstring)."""

    apply_requested = Signal(str)
    discard_requested = Signal()
    regenerate_requested = Signal(str)
    cancel_requested = Signal()
    summary_edited = Signal(str)

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compaction preview")
        self.setModal(False)
        self.resize(1000, 700)
        self._pal = pal or palette()
        self._before: ContextSnapshot | None = None
        self._after: ContextSnapshot | None = None
        self._busy = False
        self._confirming = False  # Apply was clicked once on a compaction that grows the context
        self._closed_emitted = False
        self._setting_summary = False
        self._user_edited = False
        self._apply_allowed = False

        layout = QVBoxLayout(self)
        self.headline = QLabel("Preparing the plan…")
        self.headline.setWordWrap(True)
        f = self.headline.font()
        f.setBold(True)
        self.headline.setFont(f)
        layout.addWidget(self.headline)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self._build_plan_side())
        split.addWidget(self._build_summary_side())
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout.addWidget(split, 1)
        self.error_label = QLabel("")
        self.error_label.setWordWrap(True)
        self.error_label.setVisible(False)
        layout.addWidget(self.error_label)
        layout.addLayout(self._build_buttons())
        self._connect()
        self.set_palette(self._pal)
        self.set_busy(False)

    # --- construction
    def _build_plan_side(self) -> QWidget:
        """The left side: the stacked bars before → after, their legend and the plan table."""
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        self.bars = StackedBars(pal=self._pal)
        ll.addWidget(self.bars, 2)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        ll.addWidget(self.legend)
        self.plan_label = QLabel("Plan")
        ll.addWidget(self.plan_label)
        self.plan = QTreeWidget()
        self.plan.setColumnCount(4)
        self.plan.setHeaderLabels(["", "Role", "Tokens", "Message"])
        self.plan.setRootIsDecorated(False)
        self.plan.setUniformRowHeights(True)
        self.plan.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.plan.header().setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.plan.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.plan.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.plan.header().setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        ll.addWidget(self.plan, 3)
        return left

    def _build_summary_side(self) -> QWidget:
        """The right side: the editable summary, its costs, the instruction and "Regenerate"."""
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        self.summary_label = QLabel("Summary (editable — this text replaces the compacted messages)")
        rl.addWidget(self.summary_label)
        self.costs_label = QLabel("")
        self.costs_label.setWordWrap(True)
        rl.addWidget(self.costs_label)
        self.editor = QPlainTextEdit()
        self.editor.setPlaceholderText("The summary appears here when it has been generated")
        rl.addWidget(self.editor, 1)
        # the model's reply when it is not used (summary mode "model"): shown apart, never in the editor
        self.model_reply_label = QLabel("")
        self.model_reply_label.setWordWrap(True)
        self.model_reply = QPlainTextEdit()
        self.model_reply.setReadOnly(True)
        self.model_reply.setMaximumHeight(self.fontMetrics().height() * 8)
        for w in (self.model_reply_label, self.model_reply):
            w.setVisible(False)
            rl.addWidget(w)
        regen = QHBoxLayout()
        self.instruction_edit = QLineEdit()
        self.instruction_edit.setPlaceholderText("Instruction for the summary, e.g. “keep every file path”")
        self.regenerate_button = QPushButton("Regenerate")
        regen.addWidget(self.instruction_edit, 1)
        regen.addWidget(self.regenerate_button)
        rl.addLayout(regen)
        return right

    def _build_buttons(self) -> QHBoxLayout:
        """The bottom line: busy text and progress, Cancel, Discard, Apply."""
        bottom = QHBoxLayout()
        self.busy_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # indeterminate
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop generating the summary")
        bottom.addWidget(self.busy_label)
        bottom.addWidget(self.progress)
        bottom.addWidget(self.cancel_button)
        bottom.addStretch(1)
        self.discard_button = QPushButton("Discard")
        self.apply_button = QPushButton("Apply")
        for button in (self.regenerate_button, self.cancel_button, self.discard_button, self.apply_button):
            # Enter must never press a button by accident (Enter in the instruction field regenerates)
            button.setAutoDefault(False)
            button.setDefault(False)
        bottom.addWidget(self.discard_button)
        bottom.addWidget(self.apply_button)
        return bottom

    def _connect(self) -> None:
        self._edit_timer = QTimer(self)
        self._edit_timer.setSingleShot(True)
        self._edit_timer.setInterval(250)
        self._edit_timer.timeout.connect(lambda: self.summary_edited.emit(self.editor.toPlainText()))
        self.editor.textChanged.connect(self._on_editor_changed)
        self.apply_button.clicked.connect(self._on_apply)
        self.discard_button.clicked.connect(self._on_discard)
        self.regenerate_button.clicked.connect(self._on_regenerate)
        self.instruction_edit.returnPressed.connect(self._on_regenerate)
        self.cancel_button.clicked.connect(self._on_cancel)

    # --- public API
    def open(self) -> None:
        """Show without any modality (QDialog.open() would make it window-modal); never exec()."""
        self.setWindowModality(Qt.WindowModality.NonModal)
        self.show()

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.bars.set_palette(pal)
        self.error_label.setStyleSheet(f"color: {pal.error};")
        self._update_legend()
        self._update_headline()

    def set_plan(
        self,
        before: ContextSnapshot,
        after: ContextSnapshot | None,
        compacted: Sequence[dict[str, Any]],
        kept: Sequence[dict[str, Any]],
        tokens_by_id: dict[str, int] | None = None,
        instruction: str = "",
    ) -> None:
        """Show a new plan (resets the discard guard so this plan can be discarded once)."""
        self._closed_emitted = False
        self._before = before
        self._after = after
        tokens_by_id = tokens_by_id or {}
        self.instruction_edit.setText(instruction)
        self.plan.clear()
        pal = self._pal
        comp_tokens = 0
        kept_tokens = 0
        for status, msgs in (("compacted", compacted), ("kept", kept)):
            for msg in msgs:
                tok = int(tokens_by_id.get(str(msg.get("id") or ""), 0))
                if status == "compacted":
                    comp_tokens += tok
                else:
                    kept_tokens += tok
                item = QTreeWidgetItem(
                    ["compacted" if status == "compacted" else "kept", str(msg.get("role") or "?"),
                     format_tokens(tok), preview(msg, 140)]
                )
                item.setData(0, Qt.ItemDataRole.UserRole, (status, str(msg.get("role") or "?"), tok))
                color = QColor(pal.marker if status == "compacted" else pal.ok)
                item.setForeground(0, color)
                f = item.font(0)
                f.setBold(True)
                item.setFont(0, f)
                item.setTextAlignment(2, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(3, preview(msg, 600))
                self.plan.addTopLevelItem(item)
        self.plan_label.setText(
            f"Plan: {len(compacted):,} message{'s' if len(compacted) != 1 else ''} compacted "
            f"({format_tokens(comp_tokens)} tokens) · {len(kept):,} kept "
            f"({format_tokens(kept_tokens)} tokens)"
        )
        self._n_compacted = len(compacted)
        self._update_bars()
        self._update_headline()
        self._update_apply()

    def set_after(self, after: ContextSnapshot | None) -> None:
        self._after = after
        self._update_bars()
        self._update_headline()
        self._update_apply()

    def set_summary(self, text: str) -> None:
        self._setting_summary = True
        try:
            self.editor.setPlainText(text)
        finally:
            self._setting_summary = False
        self._user_edited = False
        self._update_apply()

    def set_model_text(self, text: str) -> bool:
        if text == self.editor.toPlainText():
            return True  # the text shown stands (the digest, when the model's reply is not used)
        if self._user_edited:
            self.set_error("The model's text arrived, but you edited the summary: your text is kept "
                           "(Regenerate to see the model's)")
            return False
        self.set_summary(text)
        return True

    def set_mode(self, label: str) -> None:
        self.summary_label.setText(f"Summary: {label} (editable — this text replaces the compacted messages)")

    def set_costs(self, text: str) -> None:
        self.costs_label.setText(text)

    def costs_text(self) -> str:
        return self.costs_label.text()

    def show_summary_parts(self, summary: Any) -> None:
        """The mode and the costs of an engine summary (:class:`engine.context.summaries.Summary`)."""
        unused = ""
        if isinstance(summary, Summary):
            self.set_mode(mode_label(summary.mode, summary.model))  # type: ignore[arg-type]
            self.set_costs(summary.costs())
            if summary.model_problem and summary.model_text.strip() and summary.model_text != summary.text:
                unused = summary.model_text
        else:
            self.set_costs("")
        self.model_reply_label.setText("The model's reply, not used (the digest above stands):" if unused else "")
        self.model_reply.setPlainText(unused)
        self.model_reply_label.setVisible(bool(unused))
        self.model_reply.setVisible(bool(unused))

    def show_problem(self, plan: Any, summary: Any) -> None:
        """What keeps the plan or the summary from being applied as shown ("" clears)."""
        if not plan.needed:
            self.set_error(f"Nothing to compact: {plan.reason}")
        elif not summary.valid:
            self.set_error(f"The summary is not usable ({summary.reason}): edit it or Regenerate; "
                           "applying without one drops the messages (archived) with a note")
        elif getattr(summary, "model_problem", ""):
            self.set_error(f"The model's part is not used ({summary.model_problem}); the digest stands")
        else:
            self.set_error("")

    def summary(self) -> str:
        return self.editor.toPlainText()

    def instruction(self) -> str:
        return self.instruction_edit.text().strip()

    def set_busy(self, busy: bool, text: str = "Generating the summary…", apply_allowed: bool = False) -> None:
        self._busy = busy
        self._apply_allowed = busy and apply_allowed
        self.busy_label.setText(text if busy else "")
        self.busy_label.setVisible(busy)
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        self.editor.setReadOnly(busy and not apply_allowed)
        self.regenerate_button.setEnabled(not busy)
        self.instruction_edit.setEnabled(not busy)
        self._update_apply()

    def is_busy(self) -> bool:
        return self._busy

    def set_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    def error_text(self) -> str:
        return self.error_label.text() if self.error_label.isVisible() else ""

    def plan_rows(self) -> list[tuple[str, str, int]]:
        plan = self.plan
        role = Qt.ItemDataRole.UserRole
        items = (plan.topLevelItem(i) for i in range(plan.topLevelItemCount()))
        return [item.data(0, role) for item in items if item is not None]

    # --- internals
    def _update_bars(self) -> None:
        self.bars.set_bars([("Before", self._before), ("After", self._after)])
        self._update_legend()

    def _update_legend(self) -> None:
        pal = self._pal
        items = [(pal.regions[k], "■", REGION_LABELS[k]) for k in REGION_ORDER]
        items += [(pal.threshold, "╌╌", "threshold"), (pal.limit, "━━", "window")]
        self.legend.setText(
            " &nbsp; ".join(
                f"<span style='white-space:nowrap'><span style='color:{c}'>{g}</span>&nbsp;{t}</span>"
                for c, g, t in items
            )
        )

    def _update_headline(self) -> None:
        b, a = self._before, self._after
        if b is None:
            self.headline.setText("Preparing the plan…")
            return
        if a is None:
            self.headline.setText(f"Before: {format_tokens(b.prompt)} prompt tokens · after: computing…")
            return
        change = self.change()
        assert change is not None
        self.headline.setText(f"{change.text(format_tokens)} · window {format_tokens(a.window)}"
                              + (" · ⚠ the context grows" if change.grows else ""))
        self.headline.setToolTip(change.warning() or "The prompt as sent (without the output reserve): what the "
                                 "provider reports, and what the chat's marker and the Compactions tab show")
        self.headline.setStyleSheet(f"color: {self._pal.warning};" if change.grows else "")

    def change(self) -> CompactionChange | None:
        """The plan's before → after on the one basis every view uses (engine.model.compaction_change); None
        while the after is being computed."""
        if self._before is None or self._after is None:
            return None
        return compaction_change(self._before.prompt, self._after.prompt)

    def _update_apply(self) -> None:
        has_summary = bool(self.editor.toPlainText().strip())
        has_plan = self._before is not None and getattr(self, "_n_compacted", 0) > 0
        blocked = self._busy and not self._apply_allowed
        ok = has_summary and has_plan and not blocked
        self.apply_button.setEnabled(ok)
        if blocked:
            reason = "Wait for the summary, or Cancel"
        elif not has_plan:
            reason = "Nothing to compact"
        elif not has_summary:
            reason = "The summary is empty: write one or Regenerate"
        else:
            reason = (
                "Replace the compacted messages with this summary (they are archived; Undo restores them)"
            )
        change = self.change()
        if ok and change is not None and change.grows:
            reason = change.warning() + ". Apply asks to confirm."
        if not (ok and change is not None and change.grows):
            self._confirming = False
        self.apply_button.setText("Apply anyway" if self._confirming else "Apply")
        self.apply_button.setToolTip(reason)

    def apply_reason(self) -> str:
        return self.apply_button.toolTip()

    def _on_editor_changed(self) -> None:
        self._update_apply()
        if not self._setting_summary:
            self._user_edited = True
            self._edit_timer.start()

    def _on_apply(self) -> None:
        if not self.apply_button.isEnabled():
            return
        change = self.change()
        if change is not None and change.grows and not self._confirming:  # a second click applies
            self._confirming = True
            self.set_error(change.warning() + ". Click “Apply anyway” to apply it, or edit the summary.")
            self._update_apply()
            return
        self._confirming = False
        text = self.editor.toPlainText().strip()
        self._closed_emitted = True
        if self._busy:  # applying the digest while the model writes: the model is stopped
            self.set_busy(False)
        self.apply_requested.emit(text)
        self.hide()

    def _on_discard(self) -> None:
        self._emit_discard()
        self.hide()

    def _emit_discard(self) -> None:
        if not self._closed_emitted:
            self._closed_emitted = True
            if self._busy:
                self.cancel_requested.emit()
            self.discard_requested.emit()

    def _on_regenerate(self) -> None:
        if self._busy:
            return
        self.set_error("")
        self.regenerate_requested.emit(self.instruction())

    def _on_cancel(self) -> None:
        if self._busy:
            self.cancel_requested.emit()

    def reject(self) -> None:  # Esc
        self._emit_discard()
        super().reject()

    def closeEvent(self, event: QCloseEvent) -> None:
        self._emit_discard()
        super().closeEvent(event)
