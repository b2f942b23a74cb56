"""What the application remembers between runs, in QSettings (never pickled, read typed).

Window geometry and dock layout, recent files, the last folder and the solver settings. On Linux
this is ``~/.config/XEngine Studio/XEngine Studio.conf``; tests redirect it with
``QStandardPaths.setTestModeEnabled(True)``. Projects, not QSettings, hold documents.
"""

from __future__ import annotations

import os
from dataclasses import asdict

from PySide6.QtCore import QByteArray, QSettings

from app.project import SolverSettings

__all__ = ["ORGANIZATION", "APPLICATION", "MAX_RECENT", "AppSettings"]

ORGANIZATION = "XEngine Studio"
APPLICATION = "XEngine Studio"
MAX_RECENT = 8
LAYOUT_VERSION = 1
"""Bump when docks change, so that an old saved layout is not restored onto new docks."""


class AppSettings:
    """Typed access to the application's QSettings."""

    def __init__(self, settings: QSettings | None = None):
        self.qsettings = settings or QSettings(ORGANIZATION, APPLICATION)

    # ----- files --------------------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        value = self.qsettings.value("files/recent", [], type=list)
        return [str(p) for p in value if p]

    def add_recent_file(self, path: str) -> None:
        path = os.path.abspath(path)
        files = [path] + [p for p in self.recent_files() if p != path]
        self.qsettings.setValue("files/recent", files[:MAX_RECENT])

    def remove_recent_file(self, path: str) -> None:
        self.qsettings.setValue("files/recent", [p for p in self.recent_files() if p != path])

    def last_dir(self) -> str:
        return str(self.qsettings.value("files/last_dir", os.getcwd(), type=str))

    def set_last_dir(self, path: str) -> None:
        folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        self.qsettings.setValue("files/last_dir", folder)

    # ----- solver -------------------------------------------------------------------------------
    def solver_settings(self) -> SolverSettings:
        default = SolverSettings()
        s = self.qsettings
        return SolverSettings(
            method=s.value("solver/method", default.method, type=str),
            backend=s.value("solver/backend", default.backend, type=str),
            time_limit_s=s.value("solver/time_limit_s", default.time_limit_s, type=float),
            gap_rel=s.value("solver/gap_rel", default.gap_rel, type=float),
            auto_solve=s.value("solver/auto_solve", default.auto_solve, type=bool),
            offload=s.value("solver/offload", default.offload, type=bool),
            runs=s.value("solver/runs", default.runs, type=int),
        ).checked()

    def set_solver_settings(self, settings: SolverSettings) -> None:
        for key, value in asdict(settings).items():
            self.qsettings.setValue(f"solver/{key}", value)

    # ----- window -------------------------------------------------------------------------------
    def window_state(self) -> tuple[QByteArray | None, QByteArray | None]:
        """Saved (geometry, dock state), or ``None`` when absent or from an older layout."""
        s = self.qsettings
        if s.value("window/layout_version", 0, type=int) != LAYOUT_VERSION:
            return None, None
        geometry = s.value("window/geometry", QByteArray(), type=QByteArray)
        state = s.value("window/state", QByteArray(), type=QByteArray)
        return (geometry or None), (state or None)

    def set_window_state(self, geometry: QByteArray, state: QByteArray) -> None:
        self.qsettings.setValue("window/layout_version", LAYOUT_VERSION)
        self.qsettings.setValue("window/geometry", geometry)
        self.qsettings.setValue("window/state", state)

    def tour_seen(self) -> bool:
        """Whether the first-launch tour was finished or dismissed."""
        return bool(self.qsettings.value("help/tour_seen", False, type=bool))

    def set_tour_seen(self, seen: bool = True) -> None:
        self.qsettings.setValue("help/tour_seen", seen)

    def clear(self) -> None:
        self.qsettings.clear()
