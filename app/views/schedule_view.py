"""The schedule at a glance: the Gantt chart over the memory plots, on one shared time axis."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QSplitter, QVBoxLayout, QWidget

from app.document import Document
from app.views.gantt import GanttView
from app.views.memory import MemoryView

__all__ = ["ScheduleView"]


class ScheduleView(QWidget):
    """:class:`GanttView` stacked over :class:`MemoryView`, x-linked (zoom one, both follow).

    It adds no state: both children listen to the document themselves and each draws the step
    cursor as a vertical line at ``document.cursor_op.start``, so one line runs through both.
    Each child keeps a readable minimum height (lanes and memory plots never squashed to a few
    pixels); when the window is too short for both, the view scrolls instead.
    """

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self.gantt = GanttView(document)
        self.memory = MemoryView(document)
        self.memory.link_x(self.gantt.plot)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.gantt)
        splitter.addWidget(self.memory)
        splitter.setStretchFactor(0, 4)
        splitter.setStretchFactor(1, 5)
        splitter.setChildrenCollapsible(False)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(splitter)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll)
        self.gantt.reset_view()


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(ScheduleView))
