"""Step through the schedule one operation at a time, with a sentence saying what happens.

The panel moves the document's step cursor (``document.set_cursor``); every view follows it
(Gantt outline, memory cursor line, matrix row, graph colours). The explanation comes from
:func:`solver.execution.explain.state_at`, the same function the graph view colours nodes with.
"""

from __future__ import annotations

import html
import logging

import shiboken6
from PySide6.QtCore import QEvent, QObject, QSignalBlocker, Qt, QTimer
from PySide6.QtGui import QAction, QColor, QKeyEvent, QKeySequence, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSlider,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.icons import media_icon
from app.theme import FollowsTheme, colors_for
from app.views.binding import binding_constraints
from app.views.plotting import has_replay
from solver.document.units import format_ms, format_size
from solver.execution.explain import state_at

__all__ = ["StepperPanel"]

logger = logging.getLogger(__name__)

_OWNS_SPACE = (QAbstractButton, QLineEdit, QTextEdit, QPlainTextEdit, QAbstractSpinBox, QComboBox)
"""Widgets for which Space means something (press a button, type a space, open a list)."""


class StepperPanel(FollowsTheme, QWidget):
    """First / previous / play / next / last buttons, a slider over operations, the explanation.

    Listens to ``result_changed`` and ``cursor_changed``; writes only ``document.set_cursor``.
    Keyboard: Left/Right step, Home/End jump, Space plays or pauses. The shortcuts work while the
    panel has focus; :attr:`step_actions` lets the main window add them with a wider context.
    Space is left to a focused button or text field (it presses or types there instead).
    """

    PLAY_INTERVAL_MS = 600
    """Time between steps while playing."""

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self._icons_drawn: tuple | None = None
        """(colour, icon names) the step buttons were last painted for."""
        self._timer = QTimer(self, interval=self.PLAY_INTERVAL_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._build_items()
        self._space_guard = _SpaceGuard(self)
        document.result_changed.connect(self._on_document_result_changed)
        document.cursor_changed.connect(self._on_document_cursor_changed)
        self._redraw()

    # ----- public API -------------------------------------------------------------------------
    @property
    def step_actions(self) -> dict[str, QAction]:
        """The step actions by name: first, previous, play, next, last."""
        return dict(self._actions)

    @property
    def slider(self) -> QSlider:
        return self._slider

    @property
    def playing(self) -> bool:
        return self._timer.isActive()

    def set_play_interval(self, ms: int) -> None:
        """Time between steps while playing (default :attr:`PLAY_INTERVAL_MS`)."""
        self._timer.setInterval(ms)

    @property
    def explanation(self) -> str:
        """The explanation shown for the current step (plain text)."""
        return self._explanation_text

    def step(self, delta: int) -> None:
        """Move the cursor ``delta`` operations (from "before the first" when unset)."""
        count = self._count()
        if count == 0:
            return
        cursor = self._document.cursor
        target = (delta - 1 if delta > 0 else 0) if cursor is None else cursor + delta
        self._document.set_cursor(min(max(target, 0), count - 1))

    def first(self) -> None:
        self._document.set_cursor(0)

    def last(self) -> None:
        self._document.set_cursor(self._count() - 1 if self._count() else None)

    def set_playing(self, playing: bool) -> None:
        """Start or pause playback; playing from the last step starts over."""
        if playing and self._count():
            if self._document.cursor in (None, self._count() - 1):
                self._document.set_cursor(0)
            self._timer.start()
        else:
            self._timer.stop()
        self._redraw_play()

    # ----- building ---------------------------------------------------------------------------
    def _build_items(self) -> None:
        specs = [
            ("first", "first", "First operation", Qt.Key.Key_Home, self.first),
            (
                "previous",
                "previous",
                "Previous operation",
                Qt.Key.Key_Left,
                lambda: self.step(-1),
            ),
            (
                "play",
                "play",
                "Play / pause",
                Qt.Key.Key_Space,
                lambda: self.set_playing(not self.playing),
            ),
            (
                "next",
                "next",
                "Next operation",
                Qt.Key.Key_Right,
                lambda: self.step(1),
            ),
            ("last", "last", "Last operation", Qt.Key.Key_End, self.last),
        ]
        self._actions: dict[str, QAction] = {}
        buttons = QHBoxLayout()
        buttons.setSpacing(2)
        for name, icon, tip, key, slot in specs:
            action = QAction(tip, self)
            action.setData(icon)
            action.setToolTip(f"{tip} ({QKeySequence(key).toString()})")
            action.setShortcut(QKeySequence(key))
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            action.triggered.connect(slot)
            self.addAction(action)
            self._actions[name] = action
            button = QToolButton()
            button.setDefaultAction(action)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            buttons.addWidget(button)
        self._slider = QSlider(Qt.Orientation.Horizontal)
        self._slider.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._slider.valueChanged.connect(self._on_slider_value_changed)
        self._position = QLabel()
        self._position.setMinimumWidth(170)
        buttons.addWidget(self._slider, 1)
        buttons.addWidget(self._position)
        self._text = QLabel()
        self._text.setWordWrap(True)
        self._text.setTextFormat(Qt.TextFormat.RichText)
        self._text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._text.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self._text.setMinimumHeight(3 * self.fontMetrics().height())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.addLayout(buttons)
        layout.addWidget(self._text, 1)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._explanation_text = ""
        self._binding_text = ""

    # ----- slots ------------------------------------------------------------------------------
    def _on_document_result_changed(self) -> None:
        self.set_playing(False)
        self._redraw()

    def _on_document_cursor_changed(self) -> None:
        self._redraw()

    def _on_slider_value_changed(self, value: int) -> None:
        if self._count():
            self._document.set_cursor(value)

    def _on_timer_timeout(self) -> None:
        cursor = self._document.cursor
        if cursor is None or cursor >= self._count() - 1:
            self.set_playing(False)
            return
        self._document.set_cursor(cursor + 1)

    # ----- drawing ----------------------------------------------------------------------------
    def _count(self) -> int:
        timeline = self._document.timeline
        return len(timeline.ops) if timeline is not None else 0

    def _redraw(self) -> None:
        count = self._count()
        cursor = self._document.cursor
        with QSignalBlocker(self._slider):
            self._slider.setRange(0, max(count - 1, 0))
            self._slider.setValue(cursor or 0)
        self._slider.setEnabled(count > 0)
        for action in self._actions.values():
            action.setEnabled(count > 0)
        if count == 0:
            self._position.setText("no schedule")
            self._show("Solve the graph, then step through its operations here.", "")
        elif cursor is None:
            self._position.setText(f"– / {count} operations")
            self._show("Press ▶ or → to step through the schedule.", "")
        else:
            op = self._document.timeline.ops[cursor]
            self._position.setText(f"op {cursor + 1} / {count} · {format_ms(op.start)}")
            self._show_state(cursor)
        self._redraw_play()

    def _redraw_play(self) -> None:
        self._actions["play"].setData("pause" if self.playing else "play")
        self._redraw_icons()

    def _redraw_icons(self) -> None:
        """Icons in the palette's button-text colour, so they show on both themes."""
        color = self.palette().color(QPalette.ColorRole.ButtonText)
        key = (color.name(), tuple(action.data() for action in self._actions.values()))
        if key == self._icons_drawn:
            return  # every step and every result came here: 15 icons painted each time
        self._icons_drawn = key
        for action in self._actions.values():
            action.setIcon(media_icon(action.data(), color))

    def icon_color(self, name: str) -> QColor:
        """The colour of the drawn icon of step action ``name`` (its most common opaque one)."""
        image = self._actions[name].icon().pixmap(32, 32).toImage()
        counts: dict[int, int] = {}
        for y in range(image.height()):
            for x in range(image.width()):
                pixel = image.pixel(x, y)
                if (pixel >> 24) == 255:
                    counts[pixel] = counts.get(pixel, 0) + 1
        return QColor.fromRgba(max(counts, key=counts.get)) if counts else QColor()

    def on_theme_changed(self) -> None:
        if getattr(self, "_actions", None):
            self._redraw_icons()

    def _show_state(self, index: int) -> None:
        result = self._document.result
        graph = self._document.graph
        if not has_replay(result):
            self._show("", "")
            return
        state = state_at(graph, result.schedule, result.timeline, index)
        op = state.op
        budget = result.timeline.activation_budgets.get(op.device, 0)
        detail = (
            f"{op.device} memory while it runs: {format_size(op.memory)} of {format_size(budget)}"
        )
        if op.freed:
            freed = ", ".join(f"{node} on {device}" for device, node in op.freed)
            detail += f" · frees afterwards: {freed}"
        binds = binding_constraints(graph, result.schedule, result.timeline, index)
        self._show(state.explanation, detail, binds or ["nothing binds: every device has room"])

    @property
    def binding_text(self) -> str:
        """What binds at the current step (plain text; ``""`` before the first step)."""
        return self._binding_text

    def _show(self, explanation: str, detail: str, binds: list[str] | None = None) -> None:
        self._explanation_text = explanation
        self._binding_text = "; ".join(binds or [])
        muted = colors_for(self).muted
        head, dash, reason = explanation.partition(" — ")
        text = f"<b>{html.escape(head)}</b>{dash}{html.escape(reason)}"
        news = _not_yet_said(explanation, binds or [])
        if news:
            text += "<br><b>Binds:</b> " + html.escape("; ".join(news))
        if detail:
            text += f'<br><span style="color:{muted}">{html.escape(detail)}</span>'
        self._text.setText(text)
        self._shown_text = text

    @property
    def shown_text(self) -> str:
        """The step text as drawn (rich text)."""
        return getattr(self, "_shown_text", "")


def _not_yet_said(explanation: str, binds: list[str]) -> list[str]:
    """The binding sentences that add to ``explanation``: the step text said a recomputation's
    reason twice, and each copy of "copying a, b and c from gpu" once more in its own words.

    >>> _not_yet_said("recompute a on gpu (1 ms) — not kept", ["a is recomputed: not kept"])
    []
    >>> _not_yet_said("compute d on cpu (1 ms), copying a from gpu (2 ms)",
    ...     ["a is copied from gpu: d needs it on cpu, where it is not resident", "cpu is full"])
    ['cpu is full']
    """
    head = explanation.partition(" — ")[0]
    kept = []
    for bind in binds:
        subject, _, why = bind.partition(": ")
        if why and why in explanation:
            continue  # the explanation gives this reason already
        if subject.endswith(" is copied from " + subject.rsplit(" ", 1)[-1]) and "copying" in head:
            continue  # the explanation lists the copies
        kept.append(bind)
    return kept


class _SpaceGuard(QObject):
    """Leaves Space to the focused button or text field instead of the window-wide Play shortcut.

    Qt offers a key to the focus widget as a ``ShortcutOverride`` event before any shortcut;
    accepting it there delivers the key to the widget. Buttons do not accept it for Space, so
    the guard does it for them. It filters only the current focus widget (it follows
    ``QApplication.focusChanged``), not every event of the application.
    """

    def __init__(self, parent: QObject):
        super().__init__(parent)
        self._watched: QWidget | None = None
        app = QApplication.instance()
        app.focusChanged.connect(self._on_app_focus_changed)
        self._on_app_focus_changed(None, QApplication.focusWidget())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Space
            and event.modifiers() == Qt.KeyboardModifier.NoModifier
        ):
            event.accept()
            return True
        return False

    def _on_app_focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        if self._watched is not None and shiboken6.isValid(self._watched):
            self._watched.removeEventFilter(self)
        self._watched = new if isinstance(new, _OWNS_SPACE) else None
        if self._watched is not None:
            self._watched.installEventFilter(self)


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(StepperPanel))
