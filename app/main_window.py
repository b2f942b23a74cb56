"""The workbench: graph, devices, inspector and solver docks around the schedule views.

:func:`run` is the GUI entry point (``python main.py [FILE]``). The schedule views in the centre
are imported directly: a view that fails to import stops the window with its traceback instead
of silently losing its tab. The layout, recent files and solver settings persist in QSettings;
closing the window during a solve cancels it and waits for the worker threads.
"""

from __future__ import annotations

import gc
import logging
import sys
from dataclasses import replace

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QStyle,
    QTabWidget,
    QToolButton,
    QWidget,
)

from app.actions import build_actions
from app.dialogs import ErrorDialog
from app.document import Document
from app.execute_action import ExecuteAction
from app.files import FileController
from app.import_model import ImportModelAction
from app.panels.devices import DevicesPanel
from app.panels.inspector import InspectorPanel
from app.panels.solver_panel import SolverPanel, status_text
from app.settings import APPLICATION, ORGANIZATION, AppSettings
from app.solving import SolveController
from app.store_lookup import StoreWriter
from app.tour import Tour
from app.views.comparison import ComparisonView
from app.views.explorer import ExplorerView
from app.views.graph_view import GraphView
from app.views.matrices import MatricesView
from app.views.schedule_view import ScheduleView
from app.views.stepper import StepperPanel
from app.views.tensors import TensorMemoryView
from solver.document.examples import DEFAULT_EXAMPLE
from solver.errors import printable
from solver.optimize.backends.registry import BACKENDS
from solver.optimize.methods import method_label
from solver.optimize.solve import SolveResult

__all__ = ["MainWindow", "run", "create_window", "startup_file", "CENTRAL_VIEWS"]

logger = logging.getLogger(__name__)

CENTRAL_VIEWS: tuple[tuple[type[QWidget], str], ...] = (
    (ScheduleView, "Schedule"),
    (TensorMemoryView, "Memory per tensor"),
    (MatricesView, "R / S matrices"),
    (ComparisonView, "Comparison"),
    (ExplorerView, "Trade-off explorer"),
)
"""(view class, tab title) of the schedule views, in tab order; each is built over the document."""
STATUS_TIMEOUT_MS = 8000
CENTRAL_MIN_HEIGHT = 400
"""The schedule tabs never get less height than this (1280x720: the graph dock shrinks)."""


class MainWindow(QMainWindow):
    """The application window over one :class:`Document` (see module docstring)."""

    def __init__(self, settings: AppSettings | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("main_window")
        self.settings = settings or AppSettings()
        self.document = Document(self)
        self.document.set_settings(self.settings.solver_settings())
        self.store_writer = StoreWriter()
        """Stores finished solves off the GUI thread; drained when the window closes."""
        self.controller = SolveController(self.document, self.store_writer, self)
        self.files = FileController(self.document, self.settings, self, self)
        self.graph_view = GraphView(self.document)
        self.devices_panel = DevicesPanel(self.document)
        self.inspector = InspectorPanel(self.document)
        self.solver_panel = SolverPanel(self.document, self.controller)
        self.stepper = StepperPanel(self.document)
        self.schedule_tabs = self._build_central()
        self.files.trace_source = self._timeline_on_display
        self.docks: dict[str, QDockWidget] = {}
        self._build_docks()
        self.result_label = QLabel()
        self.statusBar().addPermanentWidget(self.result_label)
        self.tour = Tour(self)
        self.window_actions = build_actions(self)
        self._connect_actions()
        self.execute_action = ExecuteAction(self)
        self.import_model_action = ImportModelAction(self)
        self._default_state = self.saveState()
        self._connect()
        self._restore_layout()
        self._on_document_title_changed()
        self._on_document_settings_changed()
        self._on_document_result_changed()
        if not self.settings.tour_seen():
            QTimer.singleShot(0, self.tour.start)  # first launch: once the window is laid out

    # ----- building -----------------------------------------------------------------------------
    def _build_central(self) -> QTabWidget:
        tabs = QTabWidget()
        tabs.setObjectName("schedule_tabs")
        tabs.setDocumentMode(True)
        for view_class, title in CENTRAL_VIEWS:
            tabs.addTab(view_class(self.document), title)
        # the schedule is what the window is for: on a short screen the docks give way to it
        tabs.setMinimumHeight(CENTRAL_MIN_HEIGHT)
        self.setCentralWidget(tabs)
        return tabs

    def _dock(self, key: str, title: str, widget: QWidget, area: Qt.DockWidgetArea):
        dock = QDockWidget(title, self)
        dock.setObjectName(f"{key}_dock")
        dock.setWidget(widget)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        self.addDockWidget(area, dock)
        self.docks[key] = dock
        return dock

    def _build_docks(self) -> None:
        area = Qt.DockWidgetArea
        self.setCorner(Qt.Corner.TopRightCorner, area.RightDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, area.RightDockWidgetArea)
        self.setTabPosition(Qt.DockWidgetArea.AllDockWidgetAreas, QTabWidget.TabPosition.North)
        self.setDockOptions(
            QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks
        )
        graph = self._dock("graph", "Graph", self.graph_view, area.TopDockWidgetArea)
        graph.setTitleBarWidget(self._graph_title_bar(graph))
        devices = self._dock("devices", "Devices", self.devices_panel, area.RightDockWidgetArea)
        inspector = self._dock("inspector", "Inspector", self.inspector, area.RightDockWidgetArea)
        solver = self._dock("solver", "Solver", self.solver_panel, area.RightDockWidgetArea)
        self.tabifyDockWidget(devices, inspector)
        devices.raise_()
        self._dock("stepper", "Step through", self.stepper, area.BottomDockWidgetArea)
        self.resize(1480, 940)
        # the graph gives the schedule room: its memory curves were ~55 px tall at 1480x940
        self.resizeDocks([graph], [250], Qt.Orientation.Vertical)
        self.resizeDocks([devices, solver], [360, 520], Qt.Orientation.Vertical)
        self.resizeDocks([devices], [400], Qt.Orientation.Horizontal)

    def fit_docks(self) -> None:
        """Give the devices dock the height of its rows, the solver panel the rest (on a
        1280x720 screen only the CPU row showed, the GPU row, which the tour is about, had to
        be scrolled to in a sliver)."""
        devices, solver = self.docks["devices"], self.docks["solver"]
        if devices.isFloating() or solver.isFloating() or not devices.isVisible():
            return
        # the dock's title and the tab bar it shares with the inspector, as laid out now
        chrome = devices.height() - self.devices_panel.height()
        need = self.devices_panel.rows_height() + chrome
        column = devices.height() + solver.height()
        title = solver.height() - self.solver_panel.height()  # the dock's title bar
        solver_min = max(
            solver.minimumSizeHint().height(), self.solver_panel.needed_height() + title
        )
        if column <= 0:
            return
        want = min(need, max(column - solver_min, column // 3))
        if abs(devices.height() - want) <= 2:
            return  # already fitted: a relayout repaints the whole window (~100 ms)
        logger.debug("fit_docks: need %d column %d want %d", need, column, want)
        self.resizeDocks([devices, solver], [want, column - want], Qt.Orientation.Vertical)

    def _graph_title_bar(self, dock: QDockWidget) -> QWidget:
        """The graph's toolbar as its dock's title bar: at 1280x720 the title row and the
        toolbar row left the drawing 85 px. Dragging the bar's empty part still moves the
        dock; its float and close buttons are the bar's last two."""
        bar = QWidget()
        bar.setObjectName("graph_title_bar")
        row = QHBoxLayout(bar)
        row.setContentsMargins(6, 0, 2, 0)
        row.setSpacing(4)
        title = QLabel("<b>Graph</b>")
        row.addWidget(title)
        toolbar = self.graph_view.toolbar
        self.graph_view.layout().removeWidget(toolbar)
        row.addWidget(toolbar, 1)
        style = self.style()
        for icon, tip, slot in (
            (
                QStyle.StandardPixmap.SP_TitleBarNormalButton,
                "Float the graph in a window of its own",
                lambda: dock.setFloating(not dock.isFloating()),
            ),
            (
                QStyle.StandardPixmap.SP_TitleBarCloseButton,
                "Close the graph (View menu)",
                dock.close,
            ),
        ):
            button = QToolButton(icon=style.standardIcon(icon), toolTip=tip, autoRaise=True)
            button.clicked.connect(slot)
            row.addWidget(button)
        return bar

    def _connect(self) -> None:
        doc = self.document
        doc.file_path_changed.connect(self._on_document_title_changed)
        doc.modified_changed.connect(self._on_document_title_changed)
        doc.graph_changed.connect(self._on_document_title_changed)
        doc.settings_changed.connect(self._on_document_settings_changed)
        doc.edit_refused.connect(self._on_document_edit_refused)
        doc.selection_changed.connect(self._on_document_selection_changed)
        doc.edge_selection_changed.connect(self._on_document_selection_changed)
        doc.result_changed.connect(self._on_document_result_changed)
        self.files.status_message.connect(self._show_message)
        self.devices_panel.rows_rebuilt.connect(self._on_devices_panel_rows_rebuilt)
        self.solver_panel.needs_room.connect(self._on_devices_panel_rows_rebuilt)  # refit
        self.controller.running_changed.connect(self._on_controller_running_changed)
        self.controller.failed.connect(self._on_controller_failed)
        self.controller.notice.connect(self._show_message)  # e.g. a result from the store
        self._on_controller_running_changed(False)

    def _connect_actions(self) -> None:
        a = self.window_actions
        a.export_png.triggered.connect(lambda: self.export_view("png"))
        a.export_svg.triggered.connect(lambda: self.export_view("svg"))
        a.quit.triggered.connect(self.close)
        a.auto_solve.toggled.connect(self.set_auto_solve)
        for name, action in a.themes.items():
            action.triggered.connect(lambda *_, n=name: self.set_theme(n))
        a.reset_layout.triggered.connect(self.reset_layout)
        a.show_tour.triggered.connect(self.tour.start)
        a.about.triggered.connect(self.show_about)
        self.graph_view.add_edit_actions([a.add_node, a.delete, a.build_training])
        self.graph_view.full_window_action.toggled.connect(self.set_graph_full_window)
        self.addAction(self.graph_view.full_window_action)  # its shortcut, window-wide
        leave = QAction("Leave full-window graph", self, shortcut="Esc")
        leave.triggered.connect(lambda: self.graph_view.full_window_action.setChecked(False))
        leave.setEnabled(False)
        self.addAction(leave)
        self._leave_full_window = leave

    def _restore_layout(self) -> None:
        geometry, state = self.settings.window_state()
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state)
        else:  # a layout the user never arranged follows the window's size
            self._fit_pending = True

    _fit_pending = False

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._fit_pending and self.isVisible():
            QTimer.singleShot(0, self.fit_docks)  # once the docks have their new sizes

    def _on_devices_panel_rows_rebuilt(self) -> None:
        if self._fit_pending and self.isVisible():
            QTimer.singleShot(0, self.fit_docks)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._fit_pending:
            QTimer.singleShot(0, self.fit_docks)

    def _timeline_on_display(self):
        """The Schedule tab's timeline (serial or concurrent) and which it is, for the trace."""
        schedule = self.schedule_tabs.widget(0)
        concurrent = schedule.concurrent_action.isChecked()
        return schedule.gantt.timeline(), "concurrent" if concurrent else ""

    # ----- public API -------------------------------------------------------------------------
    def open_file(self, path: str) -> bool:
        """Open a project or graph file (errors are shown; the document is left unchanged)."""
        return self.files.open_path(path)

    def open_example(self, name: str = DEFAULT_EXAMPLE) -> bool:
        return self.files.open_example(name)

    def set_auto_solve(self, on: bool) -> None:
        self.document.set_settings(replace(self.document.settings, auto_solve=on))

    def set_theme(self, name: str) -> None:
        from app.theme import apply_theme

        apply_theme(QApplication.instance(), name)

    def export_view(self, kind: str) -> bool:
        """Export the schedule view on display as a ``kind`` ("png" or "svg") image."""
        return self.files.export_view(self.schedule_tabs.currentWidget(), kind)

    def set_graph_full_window(self, on: bool) -> None:
        """The graph alone in the window (a network of thousands of operations needs the
        room), or back to the layout as it was."""
        action = self.graph_view.full_window_action
        if action.isChecked() != on:
            action.setChecked(on)  # comes back here through toggled
            return
        if on == self.is_graph_full_window:
            return
        if on:
            self._layout_before_full = self.saveState()
            for key, dock in self.docks.items():
                if key != "graph":
                    dock.hide()
            self.docks["graph"].show()
            self.docks["graph"].setFloating(False)
            self.schedule_tabs.hide()
        else:
            self.schedule_tabs.show()
            if self._layout_before_full is not None:
                self.restoreState(self._layout_before_full)
            self._layout_before_full = None
        self._leave_full_window.setEnabled(on)
        self.graph_view.canvas.auto_fit = True
        QTimer.singleShot(0, self.graph_view.canvas.fit)

    _layout_before_full = None

    @property
    def is_graph_full_window(self) -> bool:
        """Whether the graph has the window to itself (View the graph in full window)."""
        return self._layout_before_full is not None

    def reset_layout(self) -> None:
        self.restoreState(self._default_state)
        self._fit_pending = True
        QTimer.singleShot(0, self.fit_docks)

    def show_about(self) -> None:
        QMessageBox.about(
            self,
            "About XEngine Studio",
            "<b>XEngine Studio</b><br>Tensor rematerialization on CPU + GPU: XEngine's MIQP "
            "solved with PuLP/CBC, every schedule replayed by the simulator.",
        )

    # ----- slots --------------------------------------------------------------------------------
    def _show_message(self, text: str) -> None:
        self.statusBar().showMessage(text, STATUS_TIMEOUT_MS)

    def _on_document_title_changed(self, *_: object) -> None:
        self.setWindowTitle(f"{self.files.display_name()}[*] \u2014 XEngine Studio")
        self.setWindowModified(self.document.is_modified)
        has_graph = self.document.graph is not None
        for action in (
            self.window_actions.add_node,
            self.window_actions.build_training,
            self.window_actions.save,
        ):
            action.setEnabled(has_graph)

    def _on_document_settings_changed(self) -> None:
        self.window_actions.auto_solve.blockSignals(True)
        self.window_actions.auto_solve.setChecked(self.document.settings.auto_solve)
        self.window_actions.auto_solve.blockSignals(False)
        self.settings.set_solver_settings(self.document.settings)

    def _on_document_selection_changed(self) -> None:
        doc = self.document
        self.window_actions.delete.setEnabled(
            doc.selection is not None or doc.selected_edge is not None
        )
        if doc.selection is not None or doc.selected_edge is not None:
            self.docks["inspector"].raise_()

    def _on_document_edit_refused(self, message: str) -> None:
        # Not a modal dialog: the edit simply did not happen, and the inspector repeats the
        # reason inline next to the field (a dialog per refused keystroke was a chore).
        self.statusBar().showMessage(f"Edit refused: {message}", 2 * STATUS_TIMEOUT_MS)

    def _on_document_result_changed(self) -> None:
        result: SolveResult | None = self.document.result
        a = self.window_actions
        for action in (a.export_png, a.export_svg, a.export_schedule, a.export_timeline):
            action.setEnabled(result is not None and result.ok)
        if result is None:
            self.result_label.setText("")
            return
        backend = BACKENDS.get(result.backend)
        how = method_label(result.method)
        if result.backend:
            how += f" \u00b7 {backend.label if backend is not None else result.backend}"
        if self.document.is_provisional:
            best = status_text(result).split(" \u00b7 ")[1]
            self.result_label.setText(f"Solving\u2026 best so far {best} (provisional)")
            return
        self.result_label.setText(f"{status_text(result)} \u00b7 {how}")
        if not result.ok and result.message:
            self._show_message(f"No schedule: {result.message}")

    def _on_controller_running_changed(self, running: bool) -> None:
        self.window_actions.solve.setEnabled(not running)
        self.window_actions.cancel.setEnabled(running)
        if running:
            self.result_label.setText("Solving\u2026")

    def _on_controller_failed(self, message: str) -> None:
        self.result_label.setText("Solve failed")
        ErrorDialog.show_error(self, "The solve failed", message)

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.files.maybe_save():
            event.ignore()
            return
        self.settings.set_window_state(self.saveGeometry(), self.saveState())
        self.settings.set_solver_settings(self.document.settings)
        self.controller.shutdown()
        self.store_writer.drain()
        event.accept()


def startup_file(args: list[str]) -> str | None:
    """The file named on the command line (``python main.py FILE``): the first argument that is
    not an option; Qt's own options (``-style fusion``) are removed by QApplication first."""
    return next((a for a in args if not a.startswith("-")), None)


def create_window(path: str | None, settings: AppSettings | None = None) -> MainWindow:
    """Build and show the window and open ``path``, or the bundled example.

    A file that cannot be opened, whatever is wrong with it, is reported (dialog and status
    bar) and the bundled example opens instead: the application never quits over it.
    """
    window = MainWindow(settings)
    window.show()
    if path is not None and window.open_file(path):
        return window
    window.open_example(DEFAULT_EXAMPLE)
    if path is not None:
        window.statusBar().showMessage(
            printable(f"Could not open {path}; showing the bundled example {DEFAULT_EXAMPLE}"),
            STATUS_TIMEOUT_MS,
        )
    return window


def run(argv: list[str] | None = None) -> int:
    """Create the application, open the file named in ``argv`` (the arguments after the
    program name; default ``sys.argv[1:]``) or the bundled example, and run the loop."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    QCoreApplication.setOrganizationName(ORGANIZATION)
    QCoreApplication.setApplicationName(APPLICATION)
    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0] if sys.argv else "xengine-studio", *args])
        args = app.arguments()[1:]  # without the options Qt consumed
    pg.setConfigOptions(antialias=True)
    try:
        from app.theme import apply_theme
    except ImportError:
        pg.setConfigOptions(background="w", foreground="k")
    else:
        apply_theme(app, "light")
    window = create_window(startup_file(args))
    QTimer.singleShot(0, window.graph_view.canvas.fit)
    # Move everything alive at startup out of the collector's reach: a full collection over
    # the Qt, numpy and pyqtgraph objects takes 50-120 ms here, an event-loop stall each time.
    gc.freeze()
    return app.exec()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
