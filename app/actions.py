"""The window's actions, menus and toolbar, built in one place so the window stays small.

Actions only call intents on the document, the file controller or the solve controller; they
hold no state. Actions whose work belongs to the window itself (export the view on display,
theme, layout, tour, about, quit, auto-solve) are created here unconnected and handed out in
:class:`WindowActions`; the window connects them (``MainWindow._connect_actions``), so nothing
here calls back into its owner. Undo/redo come from the document's ``QUndoStack`` (its texts
show in the Edit menu). Shortcuts follow the platform (Ctrl+Z / Ctrl+Shift+Z, F5 to solve).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QStyle, QToolBar

from app.commands import AddNodeCommand, BuildTrainingGraphCommand, DeleteCommand
from solver.document.examples import bundled_graphs

if TYPE_CHECKING:
    from app.main_window import MainWindow

__all__ = ["WindowActions", "build_actions"]


@dataclass
class WindowActions:
    """Named handles on the actions tests and menus use."""

    new: QAction
    open: QAction
    save: QAction
    save_as: QAction
    import_graph: QAction
    import_schedule: QAction
    export_graph: QAction
    export_png: QAction
    export_svg: QAction
    export_schedule: QAction
    export_timeline: QAction
    export_trace: QAction
    quit: QAction
    undo: QAction
    redo: QAction
    add_node: QAction
    delete: QAction
    build_training: QAction
    solve: QAction
    cancel: QAction
    auto_solve: QAction
    recent_menu: QMenu
    examples_menu: QMenu
    export_menu: QMenu
    themes: dict[str, QAction]
    """The View > Theme choices by theme name (checkable, exclusive)."""
    reset_layout: QAction
    show_tour: QAction
    about: QAction


def _action(window: MainWindow, text: str, slot=None, shortcut=None, tip: str = "", icon=None):
    action = QAction(text, window)
    if icon is not None:
        action.setIcon(window.style().standardIcon(icon))
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    if tip:
        action.setToolTip(tip)
        action.setStatusTip(tip)
    if slot is not None:
        action.triggered.connect(lambda *_: slot())
    return action


def build_actions(window: MainWindow) -> WindowActions:
    """Create the actions, the menu bar and the main toolbar of ``window``."""
    doc, files, solver = window.document, window.files, window.controller
    keys, pixmap = QKeySequence.StandardKey, QStyle.StandardPixmap
    undo = doc.undo_stack.createUndoAction(window, "&Undo")
    undo.setShortcuts([QKeySequence(keys.Undo)])
    redo = doc.undo_stack.createRedoAction(window, "&Redo")
    redo.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
    actions = WindowActions(
        new=_action(window, "&New Graph", files.new, keys.New, "Start an empty graph"),
        open=_action(window, "&Open\u2026", files.ask_open, keys.Open,
                     "Open a project or a graph file", pixmap.SP_DialogOpenButton),
        save=_action(window, "&Save", files.save, keys.Save, "Save the project",
                     pixmap.SP_DialogSaveButton),
        save_as=_action(window, "Save &As\u2026", files.save_as, keys.SaveAs),
        import_graph=_action(window, "Import &Graph\u2026", files.import_graph,
                             tip="Replace the graph by a graph file's (undoable)"),
        import_schedule=_action(window, "Import S&chedule\u2026", files.import_schedule,
                                tip="Show a schedule file for this graph"),
        export_graph=_action(window, "&Export Graph\u2026", files.export_graph,
                             tip="Write the graph alone, for the command line"),
        export_png=_action(window, "View as &PNG\u2026",
                           tip="The schedule view on display, as an image"),
        export_svg=_action(window, "View as &SVG\u2026",
                           tip="The schedule view on display, as a vector drawing"),
        export_schedule=_action(window, "Schedule as &JSON\u2026", files.export_schedule,
                                tip="The schedule file of the result on display"),
        export_timeline=_action(window, "Timeline as &CSV\u2026", files.export_timeline,
                                tip="Every operation and transfer of the result, one per row"),
        export_trace=_action(window, "Timeline as Chrome &Trace\u2026", files.export_trace,
                             tip="Open it in Perfetto (ui.perfetto.dev) or chrome://tracing"),
        quit=_action(window, "&Quit", shortcut=keys.Quit),
        undo=undo,
        redo=redo,
        add_node=_action(window, "Add &Node", lambda: doc.edit(AddNodeCommand), "Ins",
                         "Add a node (then connect it by dragging between nodes)"),
        delete=_action(window, "&Delete", lambda: _delete_selection(window), keys.Delete,
                       "Delete the selected node or edge"),
        build_training=_action(window, "Build &Training Graph",
                               lambda: doc.edit(BuildTrainingGraphCommand),
                               tip="Add a loss and the backward pass to a forward graph"),
        solve=_action(window, "&Solve", window.solver_panel.request_solve, "F5",
                      "Solve with the current settings",
                      pixmap.SP_MediaPlay),
        cancel=_action(window, "&Cancel Solve", solver.cancel, "Shift+F5",
                       "Stop the solve and keep the best schedule found", pixmap.SP_MediaStop),
        auto_solve=QAction("&Auto-solve", window, checkable=True),
        recent_menu=QMenu("Open &Recent", window),
        examples_menu=QMenu("E&xamples", window),
        export_menu=QMenu("Expor&t", window),
        themes={name: _theme_action(window, name) for name in ("light", "dark")},
        reset_layout=_action(window, "Reset &Layout"),
        show_tour=_action(window, "Show &Tour"),
        about=_action(window, "&About XEngine Studio"),
    )  # fmt: skip
    doc.result_changed.connect(lambda: _enable_trace(window, actions))
    _enable_trace(window, actions)
    actions.auto_solve.setToolTip("Solve again when a memory limit slider settles")
    _build_menus(window, actions)
    _build_toolbar(window, actions)
    return actions


def _theme_action(window: MainWindow, name: str) -> QAction:
    action = QAction(name.capitalize(), window, checkable=True, checked=name == "light")
    return action


def _delete_selection(window: MainWindow) -> None:
    doc = window.document
    if doc.selection is not None:
        doc.edit(DeleteCommand, (doc.selection,))
    elif doc.selected_edge is not None:
        doc.edit(DeleteCommand, (), (doc.selected_edge,))


def _build_menus(window: MainWindow, a: WindowActions) -> None:
    bar = window.menuBar()
    file = bar.addMenu("&File")
    file.addActions([a.new, a.open])
    file.addMenu(a.recent_menu)
    file.addMenu(a.examples_menu)
    file.addSeparator()
    file.addActions([a.save, a.save_as])
    file.addSeparator()
    file.addActions([a.import_graph, a.import_schedule, a.export_graph])
    file.addMenu(a.export_menu)
    a.export_menu.addActions([a.export_png, a.export_svg])
    a.export_menu.addSeparator()
    a.export_menu.addActions([a.export_schedule, a.export_timeline, a.export_trace])
    file.addSeparator()
    file.addAction(a.quit)
    a.recent_menu.aboutToShow.connect(lambda: _fill_recent(window, a.recent_menu))
    for name in bundled_graphs():
        a.examples_menu.addAction(name).triggered.connect(
            lambda *_, n=name: window.files.open_example(n)
        )
    edit = bar.addMenu("&Edit")
    edit.addActions([a.undo, a.redo])
    edit.addSeparator()
    edit.addActions([a.add_node, a.delete, a.build_training])
    solve = bar.addMenu("&Solve")
    solve.addActions([a.solve, a.cancel])
    solve.addSeparator()
    solve.addAction(a.auto_solve)
    view = bar.addMenu("&View")
    for dock in window.docks.values():
        view.addAction(dock.toggleViewAction())
    view.addSeparator()
    view.addActions([window.graph_view.fit_action, window.graph_view.fold_action])
    for j in range(window.schedule_tabs.count()):  # the Schedule tab's concurrent toggle
        concurrent = getattr(window.schedule_tabs.widget(j), "concurrent_action", None)
        if concurrent is not None:
            view.addAction(concurrent)
    theme = view.addMenu("&Theme")
    group = QActionGroup(window)
    for action in a.themes.values():
        group.addAction(action)
        theme.addAction(action)
    view.addSeparator()
    view.addAction(a.reset_layout)
    step = bar.addMenu("S&tep")
    for action in window.stepper.step_actions.values():
        # anywhere in the window, not only in the panel; text fields still get their keys
        # first (a QLineEdit accepts ShortcutOverride for the keys it uses)
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        window.addAction(action)
        step.addAction(action)
    help_menu = bar.addMenu("&Help")
    help_menu.addActions([a.show_tour, a.about])


def _fill_recent(window: MainWindow, menu: QMenu) -> None:
    menu.clear()
    files = window.settings.recent_files()
    for path in files:
        menu.addAction(os.path.basename(path)).triggered.connect(
            lambda *_, p=path: window.files.open_recent(p)
        )
        menu.actions()[-1].setToolTip(path)
    if not files:
        menu.addAction("(none)").setEnabled(False)


def _short(window: MainWindow, redo: bool) -> QAction:
    """A toolbar twin of Undo/Redo with a fixed label (the command goes in the tooltip), so
    the toolbar does not jump as the command text changes. Connected to the twin's own slots,
    so the connections die with it."""
    stack = window.document.undo_stack
    twin = QAction("Redo" if redo else "Undo", window)
    twin.triggered.connect(stack.redo if redo else stack.undo)
    twin.setEnabled(stack.canRedo() if redo else stack.canUndo())
    (stack.canRedoChanged if redo else stack.canUndoChanged).connect(twin.setEnabled)
    (stack.redoTextChanged if redo else stack.undoTextChanged).connect(twin.setToolTip)
    return twin


def _build_toolbar(window: MainWindow, a: WindowActions) -> None:
    bar = QToolBar("Main")
    bar.setObjectName("main_toolbar")
    bar.setMovable(False)
    bar.setToolButtonStyle(bar.toolButtonStyle().ToolButtonTextBesideIcon)
    bar.addActions([a.open, a.save])
    bar.addSeparator()
    bar.addActions([_short(window, redo=False), _short(window, redo=True)])
    bar.addSeparator()
    bar.addActions([a.solve, a.cancel])
    window.addToolBar(bar)


def _enable_trace(window: MainWindow, actions: WindowActions) -> None:
    result = window.document.result
    actions.export_trace.setEnabled(result is not None and result.ok)
