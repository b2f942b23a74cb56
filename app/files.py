"""Opening, saving and importing files for the window, and the unsaved-changes question.

Everything is read completely *before* the document is touched: a file that fails to load
(malformed JSON, a cycle, an unknown device, a negative size) shows the core's one-line message
in :class:`~app.dialogs.ErrorDialog` and leaves the current work exactly as it was.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from app.commands import ReplaceGraphCommand
from app.dialogs import Choice, ErrorDialog, FileDialog, UnsavedChangesDialog
from app.document import Document
from app.export import (
    export_chrome_trace,
    export_schedule_json,
    export_timeline_csv,
    export_widget,
)
from app.project import Project, load_any, result_from_schedule, save_project
from app.settings import AppSettings
from solver.document.examples import GRAPHS_DIR, bundled_graphs
from solver.document.graph import Graph
from solver.document.graph_io import load_graph, save_graph
from solver.document.schedule_io import load_schedule
from solver.editing.edits import empty_graph
from solver.errors import XEngineError, printable
from solver.execution.simulate import Timeline

__all__ = ["FileController", "PROJECT_SUFFIX", "OPEN_FILTERS"]

logger = logging.getLogger(__name__)

PROJECT_SUFFIX = ".xengine.json"
OPEN_FILTERS = (
    "Projects and graphs (*.xengine.json *.graph.json *.json);;"
    "XEngine projects (*.xengine.json);;Graphs (*.graph.json);;All files (*)"
)
GRAPH_FILTERS = "Graphs (*.graph.json *.json);;All files (*)"
SCHEDULE_FILTERS = "Schedules (*.schedule.json *.json);;All files (*)"
IMAGE_FILTERS = {"png": "PNG images (*.png)", "svg": "SVG drawings (*.svg)"}
CSV_FILTERS = "CSV tables (*.csv);;All files (*)"
TRACE_FILTERS = "Chrome trace (*.json);;All files (*)"


class FileController(QObject):
    """File actions of the window over ``document``; dialogs are parented to ``window``."""

    status_message = Signal(str)
    """A short message for the status bar (what was opened, saved, imported)."""
    recent_changed = Signal()
    """The recent-files list changed."""

    def __init__(
        self,
        document: Document,
        settings: AppSettings,
        window: QWidget | None = None,
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self._document = document
        self._settings = settings
        self._window = window

    # ----- naming -------------------------------------------------------------------------------
    def display_name(self) -> str:
        """The file name, or the graph name for a document never saved."""
        if self._document.file_path:
            return Path(self._document.file_path).name
        graph = self._document.graph
        return graph.name if graph is not None else "untitled"

    # ----- open ---------------------------------------------------------------------------------
    def maybe_save(self) -> bool:
        """Ask to save unsaved edits; False means the user cancelled (keep everything)."""
        if not self._document.is_modified:
            return True
        choice = UnsavedChangesDialog.ask(self._window, self.display_name())
        if choice is Choice.SAVE:
            return self.save()
        return choice is Choice.DISCARD

    def new(self) -> bool:
        """Start an empty graph (a CPU and a GPU, no nodes)."""
        if not self.maybe_save():
            return False
        self._document.open(empty_graph(), None, self._document.settings)
        self.status_message.emit("New graph: double-click the graph view to add nodes.")
        return True

    def open_path(self, path: str | os.PathLike, remember: bool = True) -> bool:
        """Open a project or a graph file; on error, say why and change nothing."""
        path = os.fspath(path)
        try:
            project, is_project = load_any(path)
        except XEngineError as exc:
            self._fail(f"Could not open {Path(path).name}", exc)
            return False
        except Exception as exc:  # any file, e.g. from the command line
            # The core's readers should turn every bad file into an XEngineError; if one slips
            # through, say so and keep the window rather than losing the user's work.
            logger.exception("unexpected error opening %s", path)
            self._fail(f"Could not open {Path(path).name}", f"unexpected error: {exc!r}")
            return False
        if not self.maybe_save():
            return False
        self._document.open(
            project.graph,
            path if is_project else None,
            project.settings if is_project else self._document.settings,
            project.result,
        )
        if remember:
            self._settings.add_recent_file(path)
            self._settings.set_last_dir(path)
            self.recent_changed.emit()
        notes = "; ".join(project.graph.notes)
        self.status_message.emit(f"Opened {Path(path).name}" + (f" ({notes})" if notes else ""))
        return True

    def open_example(self, name: str) -> bool:
        """Open a bundled graph (File > Examples)."""
        return self.open_path(bundled_graphs()[name], remember=False)

    def ask_open(self) -> bool:
        path = FileDialog.open_path(self._window, "Open", self._settings.last_dir(), OPEN_FILTERS)
        return self.open_path(path) if path else False

    def open_recent(self, path: str) -> bool:
        if not os.path.exists(path):
            self._settings.remove_recent_file(path)
            self.recent_changed.emit()
        return self.open_path(path)

    # ----- save ---------------------------------------------------------------------------------
    def save(self) -> bool:
        """Save the project to its file (asking for one the first time)."""
        if self._document.file_path is None:
            return self.save_as()
        return self._write(self._document.file_path)

    def save_as(self) -> bool:
        if self._document.graph is None:
            return False
        folder = self._settings.last_dir()
        suggestion = os.path.join(folder, _slug(self.display_name()) + PROJECT_SUFFIX)
        path = FileDialog.save_path(
            self._window, "Save project", suggestion, f"XEngine projects (*{PROJECT_SUFFIX})"
        )
        if not path:
            return False
        if not path.endswith(".json"):
            path += PROJECT_SUFFIX
        return self._write(path)

    def _write(self, path: str) -> bool:
        document = self._document
        project = Project(document.graph, document.settings, document.result)
        try:
            save_project(project, path)
        except OSError as exc:
            self._fail(f"Could not save {Path(path).name}", exc)
            return False
        document.set_file_path(path)
        document.undo_stack.setClean()
        self._settings.add_recent_file(path)
        self._settings.set_last_dir(path)
        self.recent_changed.emit()
        self.status_message.emit(f"Saved {Path(path).name}")
        return True

    def export_graph(self) -> bool:
        """Write the graph alone, as a ``*.graph.json`` for the command line."""
        graph = self._document.graph
        if graph is None:
            return False
        suggestion = os.path.join(self._settings.last_dir(), _slug(graph.name) + ".graph.json")
        path = FileDialog.save_path(self._window, "Export graph", suggestion, GRAPH_FILTERS)
        if not path:
            return False
        try:
            save_graph(graph, path)
        except OSError as exc:
            self._fail(f"Could not write {Path(path).name}", exc)
            return False
        self.status_message.emit(f"Exported the graph to {Path(path).name}")
        return True

    def export_view(self, widget: QWidget, kind: str) -> bool:
        """Render ``widget`` (the view on display) as a ``kind`` ("png" or "svg") image."""
        return self._export(
            f"Export view as {kind.upper()}", f"-view.{kind}", IMAGE_FILTERS[kind],
            lambda path: export_widget(widget, path),
        )  # fmt: skip

    def export_schedule(self) -> bool:
        """Write the result's schedule (with its timeline summary) as a schedule file."""
        result = self._document.result
        if result is None or result.schedule is None:
            return False
        return self._export(
            "Export schedule", ".schedule.json", SCHEDULE_FILTERS,
            lambda path: export_schedule_json(result.schedule, path, result.timeline),
        )  # fmt: skip

    def export_timeline(self) -> bool:
        """Write the result's timeline, one row per operation and transfer, as CSV."""
        result = self._document.result
        if result is None or result.timeline is None:
            return False
        return self._export(
            "Export timeline", ".timeline.csv", CSV_FILTERS,
            lambda path: export_timeline_csv(result.timeline, path),
        )  # fmt: skip

    trace_source: Callable[[], tuple[Timeline | None, str]] | None = None
    """The timeline on display and what it is ("" or "concurrent"), set by the window: the
    trace is the timeline the user looks at (it was always the serial one)."""

    def export_trace(self) -> bool:
        """Write the timeline on display as a Chrome trace (Perfetto, chrome://tracing)."""
        result = self._document.result
        if result is None or result.timeline is None:
            return False
        timeline, kind = result.timeline, ""
        if self.trace_source is not None:
            shown, kind = self.trace_source()
            timeline = shown if shown is not None else timeline
        graph = self._document.graph
        name = (graph.name if graph is not None else "schedule").replace(" ", "_") or "schedule"
        name += f" ({kind})" if kind else ""
        return self._export(
            "Export Chrome trace", ".trace.json", TRACE_FILTERS,
            lambda path: export_chrome_trace(timeline, path, name),
        )  # fmt: skip

    def export_folder(self) -> str:
        """Where an export is offered: the last folder used, unless that is the bundled
        examples' folder inside the installation (File > Open of an example left the dialog
        there), then the home folder."""
        folder = self._settings.last_dir()
        try:
            inside = Path(folder).resolve().is_relative_to(GRAPHS_DIR.resolve().parent)
        except (OSError, ValueError):
            inside = False
        return str(Path.home()) if inside else folder

    def _export(self, caption: str, suffix: str, filters: str, write) -> bool:
        graph = self._document.graph
        name = _slug(graph.name if graph is not None else "") + suffix
        path = FileDialog.save_path(
            self._window, caption, os.path.join(self.export_folder(), name), filters
        )
        if not path:
            return False
        try:
            write(path)
        except (OSError, ValueError) as exc:
            self._fail(f"Could not write {Path(path).name}", exc)
            return False
        self._settings.set_last_dir(path)
        self.status_message.emit(f"Exported {Path(path).name}")
        return True

    # ----- import -------------------------------------------------------------------------------
    def import_graph(self, path: str | None = None) -> bool:
        """Replace the graph by a graph file's, as one undoable edit."""
        path = path or FileDialog.open_path(
            self._window, "Import graph", self._settings.last_dir(), GRAPH_FILTERS
        )
        if not path:
            return False
        try:
            graph = load_graph(path)
        except XEngineError as exc:
            self._fail(f"Could not import {Path(path).name}", exc)
            return False
        self.adopt_graph(graph, f"Import {Path(path).name}")
        self.status_message.emit(f"Imported the graph of {Path(path).name}")
        return True

    def adopt_graph(self, graph: Graph, label: str) -> None:
        """Show ``graph`` instead of the current one, as one undoable edit named ``label``
        (Import Graph, Import Model): Undo brings back what was there, nothing is lost."""
        if self._document.graph is None:
            self._document.open(graph, None, self._document.settings)
        else:
            self._document.edit(ReplaceGraphCommand, graph, label)

    def import_schedule(self, path: str | None = None) -> bool:
        """Show a schedule file for the current graph (replayed by the simulator)."""
        graph = self._document.graph
        if graph is None:
            return False
        path = path or FileDialog.open_path(
            self._window, "Import schedule", self._settings.last_dir(), SCHEDULE_FILTERS
        )
        if not path:
            return False
        try:
            result = result_from_schedule(graph, load_schedule(path, graph))
        except XEngineError as exc:
            self._fail(f"Could not import {Path(path).name}", exc)
            return False
        self._document.set_result(result)
        valid = "valid" if result.ok else f"invalid: {result.message}"
        self.status_message.emit(f"Imported schedule {Path(path).name} ({valid})")
        return True

    def _fail(self, title: str, exc: Exception | str) -> None:
        message = printable(str(exc))[:2000]
        logger.info("%s: %s", title, message)
        ErrorDialog.show_error(self._window, printable(title), message)
        self.status_message.emit(f"{printable(title)}: {message}")


def _slug(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_" else "-" for c in name.strip())
    return keep.strip("-").lower() or "untitled"
