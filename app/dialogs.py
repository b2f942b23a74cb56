"""Modal dialogs behind classmethods, so that tests can monkeypatch them (pytest-qt docs).

Nothing else in the window opens a modal dialog directly: an error while loading, the
unsaved-changes question and the file choosers all go through these.
"""

from __future__ import annotations

import enum

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

__all__ = ["ErrorDialog", "UnsavedChangesDialog", "Choice", "FileDialog"]


class ErrorDialog:
    """Show an error: a short title and the core's one-line message naming the problem."""

    @classmethod
    def show_error(cls, parent: QWidget | None, title: str, message: str) -> None:
        box = QMessageBox(parent)
        box.setIcon(QMessageBox.Icon.Critical)
        box.setWindowTitle("XEngine Studio")
        box.setText(title)
        box.setInformativeText(message)
        box.setStyleSheet("QLabel#qt_msgbox_informativelabel { min-width: 460px; }")
        box.exec()


class Choice(enum.Enum):
    """The answer to "save your changes?"."""

    SAVE = "save"
    DISCARD = "discard"
    CANCEL = "cancel"


class UnsavedChangesDialog:
    """Ask whether to save the current document before it is replaced or the window closes."""

    @classmethod
    def ask(cls, parent: QWidget | None, name: str) -> Choice:
        buttons = QMessageBox.StandardButton
        answer = QMessageBox.question(
            parent,
            "XEngine Studio",
            f"Save the changes to \u201c{name}\u201d?",
            buttons.Save | buttons.Discard | buttons.Cancel,
            buttons.Save,
        )
        return {buttons.Save: Choice.SAVE, buttons.Discard: Choice.DISCARD}.get(
            answer, Choice.CANCEL
        )


class FileDialog:
    """Choose a file to open or a path to save to; ``None`` when the user cancels."""

    @classmethod
    def open_path(
        cls, parent: QWidget | None, caption: str, directory: str, filters: str
    ) -> str | None:
        path, _ = QFileDialog.getOpenFileName(parent, caption, directory, filters)
        return path or None

    @classmethod
    def save_path(
        cls, parent: QWidget | None, caption: str, directory: str, filters: str
    ) -> str | None:
        path, _ = QFileDialog.getSaveFileName(parent, caption, directory, filters)
        return path or None
