"""The schedule at a glance: the Gantt chart over the memory plots, on one shared time axis."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QSignalBlocker, Qt, QThreadPool, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QLabel,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.tasks import CurrentTask
from app.views.concurrent_job import Makespan, makespan_job
from app.views.concurrent_source import ConcurrentSource
from app.views.gantt import GanttView
from app.views.gantt_lanes import timeline_total
from app.views.gantt_text import result_label
from app.views.memory import MemoryView
from app.views.plotting import has_replay
from app.workers import ProcessWorker
from solver.document.units import format_ms
from solver.optimize.solve import SolveResult

__all__ = ["ScheduleView"]

logger = logging.getLogger(__name__)


class ScheduleView(QWidget):
    """:class:`GanttView` stacked over :class:`MemoryView`, x-linked (zoom one, both follow).

    It adds no state: both children listen to the document themselves and each draws the step
    cursor as a vertical line at ``document.cursor_op.start``, so one line runs through both.
    Each child keeps a readable minimum height (lanes and memory plots never squashed to a few
    pixels); when the window is too short for both, the view scrolls instead.

    ``concurrent_action`` (checkable; also in the View menu) redraws both on the concurrent
    timeline, devices and links working in parallel (:mod:`solver.execution.concurrent`); the label
    beside it always gives the serial cost and the concurrent makespan. Listens to
    ``result_changed`` and ``graph_changed`` for that label.
    """

    def __init__(self, document: Document, parent: QWidget | None = None):
        super().__init__(parent)
        self._document = document
        self._concurrent = ConcurrentSource()
        self._label_layout = _LabelLayout(document, self)
        self._label_layout.ready.connect(self._update_label)
        self.gantt = GanttView(document)
        self.memory = MemoryView(document)
        self.memory.link_x(self.gantt.plot)
        # one time axis title, under the last memory plot: the Gantt's own was cut by the
        # overview strip at 1280x720 (its ticks stay, x-linked)
        self.gantt.plot.getAxis("bottom").showLabel(False)
        self.concurrent_action = QAction("&Concurrent Timeline", self, checkable=True)
        self.concurrent_action.setToolTip(
            "Draw the schedule with devices and links working in parallel (an estimate; "
            "the solver's objective stays the serial sum)"
        )
        self.concurrent_action.toggled.connect(self._on_concurrent_toggled)
        # a check box shows its state plainly; it and the action follow each other
        toggle = QCheckBox("Concurrent timeline")
        toggle.setToolTip(self.concurrent_action.toolTip())
        toggle.toggled.connect(self.concurrent_action.setChecked)
        self.concurrent_action.toggled.connect(toggle.setChecked)
        self.concurrent_box = toggle
        self.makespan_label = QLabel()
        self.makespan_label.setTextFormat(Qt.TextFormat.RichText)
        self.makespan_label.setToolTip(
            "The serial cost is the solver's objective (every operation and copy one after the "
            "other); the concurrent makespan lays the same schedule out with every device and "
            "link working in parallel"
        )
        self.compare_box = QComboBox()
        self.compare_box.setToolTip(
            "Overlay another result of this graph (another budget, method, or with and "
            "without offloading) in the Gantt chart and the memory curves"
        )
        self.compare_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.compare_box.setMaximumWidth(260)
        self.compare_box.activated.connect(self._on_compare_box_activated)
        self._choices: list[SolveResult] = []
        # in the Gantt chart's tool row: a row of its own cost the curves their height
        self.gantt.add_tools(toggle, self.makespan_label, self.compare_box)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.gantt)
        splitter.addWidget(self.memory)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)  # the curves need the height more than 4 lanes
        splitter.setChildrenCollapsible(False)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(splitter)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.scroll)
        document.result_changed.connect(self._update_label)
        document.graph_changed.connect(self._update_label)
        document.result_changed.connect(self._fill_compare_box)
        document.graph_changed.connect(self._fill_compare_box)
        self._fill_compare_box()
        self._update_label()
        self.gantt.reset_view()

    def compare_with(self, result: SolveResult | None) -> None:
        """Overlay ``result`` in the Gantt chart and the memory curves (``None``: nothing)."""
        self._compared = result
        self.gantt.set_compared(result)
        self.memory.set_compared(result)
        self._fill_compare_box()

    _compared: SolveResult | None = None

    def compare_choices(self) -> list[str]:
        """The compare box's entries (the first: nothing)."""
        return [self.compare_box.itemText(i) for i in range(self.compare_box.count())]

    def _fill_compare_box(self) -> None:
        """Every stored result of this graph but the one on display (the document's cache:
        solved here, or found in the result store)."""
        shown = self._document.result
        self._choices = [r for r in self._document.cached_results() if r is not shown]
        if self._compared is not None and self._compared not in self._choices:
            self._compared = None  # another graph, or now on display itself
            self.gantt.set_compared(None)
            self.memory.set_compared(None)
        with QSignalBlocker(self.compare_box):
            self.compare_box.clear()
            self.compare_box.addItem(
                "compare with\u2026" if self._choices else "nothing to compare"
            )
            for result in self._choices:
                self.compare_box.addItem(result_label(result))
            if self._compared is not None:
                self.compare_box.setCurrentIndex(self._choices.index(self._compared) + 1)
        self.compare_box.setEnabled(bool(self._choices))

    def _on_compare_box_activated(self, index: int) -> None:
        self.compare_with(self._choices[index - 1] if index > 0 else None)

    def _on_concurrent_toggled(self, on: bool) -> None:
        source = self._concurrent if on else None
        self.gantt.set_timeline_source(source)
        self.memory.set_timeline_source(source)
        self.gantt.reset_view()
        self._update_label()

    def _update_label(self) -> None:
        """Serial cost and concurrent makespan side by side; the one drawn in bold.

        A running solve's provisional incumbents get no layout unless it is drawn: the GUI
        thread stays free for them (the final result gets its figure). Unless the views draw
        the concurrent timeline (they need it now), a big schedule's layout is made in a child
        process (:class:`_LabelLayout`: 0.1 s for 5,000 operations, and on a thread it starved
        the GUI thread of the GIL) and the label says so until it arrives.
        """
        document = self._document
        on = self.concurrent_action.isChecked()
        if document.is_provisional and not on and document.timeline is not None:
            serial = format_ms(timeline_total(document.timeline))
            self.makespan_label.setText(f"<b>serial {serial}</b> · concurrent: when the solve ends")
            return
        if on:
            layout = self._concurrent.layout(document)
            figures = (layout.serial_ms, layout.makespan_ms, layout.speedup) if layout else None
        else:
            pending, figures = self._label_layout.makespan(document)
            if pending:
                serial = format_ms(timeline_total(document.timeline))
                self.makespan_label.setText(f"<b>serial {serial}</b> · concurrent: computing\u2026")
                return
        if figures is None:
            self.makespan_label.setText(
                "<i>concurrent makespan: no valid schedule on display</i>"
                if document.result is not None
                else ""
            )
            return
        serial_ms, makespan_ms, speedup = figures
        serial = f"serial {format_ms(serial_ms)}"
        concurrent = f"concurrent {format_ms(makespan_ms)}"
        serial, concurrent = (
            (serial, f"<b>{concurrent}</b>") if on else (f"<b>{serial}</b>", concurrent)
        )
        self.makespan_label.setText(f"{serial} · {concurrent} ({speedup:.2f}×)")


BACKGROUND_LAYOUT_EVENTS = 500
"""From how many operations and copies on the label's concurrent layout is made in a child
process (about 20 µs each here: below this it costs less than a frame, and a child more)."""


class _LabelLayout(QObject):
    """The makespan label's figures, from a child process for a big schedule.

    :meth:`makespan` answers at once from what was computed for the result on display (a
    small schedule is laid out here), or starts a child (:mod:`app.views.concurrent_job`)
    and answers "pending"; ``ready`` is emitted when the figures of the result then on
    display have arrived. One child at a time: a result shown meanwhile is laid out after
    it, and figures for a result no longer on display are kept but not announced.
    """

    ready = Signal()

    def __init__(self, document: Document, parent: QObject | None = None):
        super().__init__(parent)
        self._document = document
        self._known: tuple[object, object, Makespan | None] = (None, None, None)
        self._task = CurrentTask(self)
        self._task.finished.connect(self._on_task_finished)
        self._task.failed.connect(self._on_task_failed)
        self._for: tuple[object, object] = (None, None)

    def makespan(self, document: Document) -> tuple[bool, Makespan | None]:
        """(pending, figures) for the result on display; ``None``: no concurrent layout."""
        timeline, graph = document.timeline, document.graph
        known_timeline, known_graph, figures = self._known
        if known_timeline is timeline and known_graph is graph:
            return False, figures
        if timeline is None or len(timeline.ops) + len(timeline.transfers) < (
            BACKGROUND_LAYOUT_EVENTS
        ):
            layout = ConcurrentSource().layout(document)
            figures = (layout.serial_ms, layout.makespan_ms, layout.speedup) if layout else None
            self._known = (timeline, graph, figures)
            return False, figures
        result = document.result
        if not (timeline.valid and has_replay(result)):  # as ConcurrentSource: no layout
            self._known = (timeline, graph, None)
            return False, None
        if not self._task.running:
            self._start(document)
        return True, None

    def _start(self, document: Document) -> None:
        result = document.result
        assert result is not None and result.schedule is not None and document.graph is not None
        timeline, graph = document.timeline, document.graph
        worker = ProcessWorker(makespan_job(graph, result.schedule, timeline), "makespan")
        self._for = (timeline, graph)
        pool = QThreadPool.globalInstance()  # never queue the window's solve behind it
        pool.setMaxThreadCount(max(pool.maxThreadCount(), pool.activeThreadCount() + 1))
        self._task.start(
            worker, worker.signals.progress, worker.signals.finished, worker.signals.failed
        )

    def _on_task_finished(self, worker: ProcessWorker, figures: object) -> None:
        timeline, graph = self._for
        self._known = (timeline, graph, figures if isinstance(figures, tuple) else None)
        self._ended()

    def _on_task_failed(self, worker: ProcessWorker, message: str) -> None:
        logger.warning("concurrent layout for the makespan label failed: %s", message)
        timeline, graph = self._for
        self._known = (timeline, graph, None)
        self._ended()

    def _ended(self) -> None:
        document = self._document
        if (document.timeline, document.graph) == self._for:
            self.ready.emit()
        elif document.timeline is not None and not document.is_provisional:
            self.makespan(document)  # another result came meanwhile: lay it out now
            self.ready.emit()


if __name__ == "__main__":
    from app.views.demo import run_demo

    raise SystemExit(run_demo(ScheduleView))
