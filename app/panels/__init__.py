"""Dock panels of the main window: devices, solver, inspector."""
