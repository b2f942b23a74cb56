"""The ``__main__`` demo shared by the views: one view alone on a solved bundled graph."""

from __future__ import annotations

import logging
import sys

from PySide6.QtWidgets import QApplication, QWidget

from app.document import Document
from app.theme import apply_theme
from solver.document.examples import example_path
from solver.document.graph_io import load_graph
from solver.optimize.methods import solve

__all__ = ["demo_document", "run_demo"]


def demo_document(name: str = "chain", method: str = "xengine") -> Document:
    """A document holding bundled graph ``name`` and its ``method`` schedule."""
    document = Document()
    graph = load_graph(example_path(name))
    document.set_graph(graph)
    document.set_result(solve(graph, method))
    document.set_cursor(0)
    return document


def run_demo(view_class: type[QWidget], name: str = "chain", theme: str = "light") -> int:
    """Show ``view_class(document)`` for bundled graph ``name`` (``argv[1]`` overrides it)."""
    logging.basicConfig(level=logging.INFO)
    app = QApplication.instance() or QApplication(sys.argv)
    apply_theme(app, theme)
    document = demo_document(sys.argv[1] if len(sys.argv) > 1 else name)
    view = view_class(document)
    view.setWindowTitle(f"{view_class.__name__}: {document.graph.name}")
    view.resize(1100, 520)
    view.show()
    return app.exec()
