"""Views of the document: each a ``QWidget`` built as ``View(document, parent=None)``."""
