"""The first-launch tour: five short cards that point at the parts of the window, in order.

A card floats over the top of the schedule area (a child of the window, never a modal dialog),
says what one part does and outlines it. Next/Back move through the cards; "Skip tour" or
finishing it hides it for good (``AppSettings.set_tour_seen``); Help > Show Tour brings it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

if TYPE_CHECKING:
    from app.main_window import MainWindow

__all__ = ["TOUR", "TourCard", "Tour"]


@dataclass(frozen=True)
class TourCard:
    """One step: a title, a sentence or two, and the window part (a dock key, or "schedule")."""

    title: str
    text: str
    target: str


TOUR = (
    TourCard(
        "The graph",
        "Each box is one operation of a training step; its height is the memory of its output. "
        "Click a node to edit it in the Inspector; double-click the background to add one.",
        "graph",
    ),
    TourCard(
        "Devices and memory limits",
        "Each slider sets a device's memory limit. Its red mark is the lower bound (below it the "
        "device cannot run every node alone), the green one the peak without recomputation.",
        "devices",
    ),
    TourCard(
        "Solve",
        "Solve finds the fastest schedule that fits the memory limits: XEngine recomputes "
        "tensors and moves work between devices. Its best schedule so far is drawn while it runs.",
        "solver",
    ),
    TourCard(
        "The schedule",
        "The Gantt chart shows what ran where and when (W/S zoom, A/D pan, Shift+drag "
        "measures); the memory plots show each device against its activation budget. More views "
        "are in the tabs: memory per tensor, R/S matrices, the comparison and the trade-off.",
        "schedule",
    ),
    TourCard(
        "Step through",
        "Walk the schedule one operation at a time (arrow keys, Space plays): each step says "
        "what runs, what is in memory and which limit binds.",
        "stepper",
    ),
)


class Tour(QFrame):
    """The tour card over ``window`` (see module docstring)."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self._window = window
        self._step = 0
        self.setObjectName("tour")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        # the background said outright: with a style sheet, autoFillBackground left the card
        # see-through and the Gantt chart's tool row showed through its title (1280x720)
        self.setStyleSheet(
            "#tour { border: 2px solid #e69f00; border-radius: 6px; "
            "background-color: palette(window); }"
        )
        self._title = QLabel()
        self._text = QLabel(wordWrap=True)
        self._count = QLabel()
        self._skip = QPushButton("Skip tour")
        self._back = QPushButton("Back")
        self.next_button = self._next = QPushButton("Next")
        self._skip.clicked.connect(self.dismiss)
        self._back.clicked.connect(lambda: self.show_step(self._step - 1))
        self._next.clicked.connect(self._on_next_clicked)
        buttons = QHBoxLayout()
        buttons.addWidget(self._count)
        buttons.addStretch(1)
        for button in (self._skip, self._back, self._next):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.addWidget(self._title)
        layout.addWidget(self._text)
        layout.addLayout(buttons)
        self._outline = QFrame(window)
        self._outline.setObjectName("tour_outline")
        self._outline.setStyleSheet("#tour_outline { border: 3px solid #e69f00; }")
        self._outline.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self._outline.hide()
        window.installEventFilter(self)
        self.hide()

    @property
    def step(self) -> int:
        return self._step

    @property
    def card(self) -> TourCard:
        return TOUR[self._step]

    def start(self) -> None:
        """Show the first card."""
        self.show_step(0)

    def show_step(self, step: int) -> None:
        self._step = min(max(step, 0), len(TOUR) - 1)
        card = TOUR[self._step]
        self._title.setText(f"<b>{card.title}</b>")
        self._text.setText(card.text)
        self._count.setText(f"{self._step + 1} of {len(TOUR)}")
        self._back.setEnabled(self._step > 0)
        self._next.setText("Done" if self._step == len(TOUR) - 1 else "Next")
        self.show()
        self.raise_()
        self._place()

    def dismiss(self) -> None:
        """Hide the tour and remember it (Skip tour, Done).

        The keyboard focus goes to the step-through panel, whose keys the last card names:
        hiding the focused Done button let Qt hand the focus to the next widget in line, the
        first device's name field, where the arrow keys and Space edited the name.
        """
        focus = QApplication.focusWidget()
        ours = focus is None or focus is self or self.isAncestorOf(focus)
        self.hide()
        self._outline.hide()
        self._window.settings.set_tour_seen(True)
        if ours:
            self._window.stepper.setFocus(Qt.FocusReason.OtherFocusReason)

    def target_widget(self) -> QWidget | None:
        """The part of the window the current card is about."""
        target = TOUR[self._step].target
        if target == "schedule":
            return self._window.schedule_tabs
        dock = self._window.docks.get(target)
        return dock if dock is not None and dock.isVisible() else None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._window and event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False

    def _on_next_clicked(self) -> None:
        if self._step == len(TOUR) - 1:
            self.dismiss()
        else:
            self.show_step(self._step + 1)

    def _place(self) -> None:
        window = self._window
        width = min(460, window.width() - 40)
        self.setFixedWidth(width)
        self.adjustSize()
        central = window.schedule_tabs.geometry()
        self.move(central.x() + (central.width() - width) // 2, central.y() + 40)
        target = self.target_widget()
        if target is None:
            self._outline.hide()
            return
        top_left = target.mapTo(window, target.rect().topLeft())
        self._outline.setGeometry(top_left.x(), top_left.y(), target.width(), target.height())
        self._outline.show()
        self._outline.raise_()
        self.raise_()
