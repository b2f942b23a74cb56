"""The exceptions of the core, each carrying what a person needs to fix the problem.

Messages read ``<file>: <where>: <what>; <fix>`` so that the command line can print them on one
line and the GUI can show them in a dialog without a traceback. Text that comes from a file (node
ids, device names) is escaped by :func:`printable`, so a newline or a terminal escape sequence in
an id is shown as ``\\n`` or ``\\x1b`` and never breaks the line or drives the terminal.
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "printable",
    "XEngineError",
    "GraphFormatError",
    "ScheduleFormatError",
    "ScheduleViolation",
    "FileWriteError",
]

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """Escape control and format characters (newlines, ANSI escapes, bidi overrides) as in repr.

    Examples
    --------
    >>> printable("node 'a\\nb\\x1b[31m' é")
    "node 'a\\\\nb\\\\x1b[31m' é"
    """
    return "".join(_escape(c) if _is_control(c) else c for c in text)


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs")


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class XEngineError(Exception):
    """Base class of every error the core raises on purpose."""


class GraphFormatError(XEngineError, ValueError):
    """A graph document is malformed or inconsistent.

    Parameters
    ----------
    what
        What is wrong, e.g. ``"-4 MiB is negative"``.
    path
        The file the document came from, when there is one.
    where
        The place in the document, e.g. ``"node 'conv3', field 'memory'"``.
    fix
        How to repair it, e.g. ``"sizes must be >= 0"``.
    """

    kind = "graph"

    def __init__(self, what: str, *, path: str | None = None, where: str = "", fix: str = ""):
        self.what = what
        self.path = path
        self.where = where
        self.fix = fix
        super().__init__(self._compose())

    def _compose(self) -> str:
        parts = [p for p in (self.path, self.where) if p]
        head = ": ".join([*parts, self.what])
        return printable(f"{head}; {self.fix}" if self.fix else head)

    def with_path(self, path: str) -> GraphFormatError:
        """Return a copy that names ``path`` (loaders learn the file name late)."""
        return type(self)(self.what, path=path, where=self.where, fix=self.fix)


class ScheduleFormatError(GraphFormatError):
    """A schedule document is malformed or does not match its graph."""

    kind = "schedule"


class ScheduleViolation(XEngineError):
    """A schedule breaks a rule of docs/model.md section 2.

    Carries the stage, node and device where the first violation happened, the rule broken and
    the numbers involved, so that a person can find it in the step-through view.
    """

    def __init__(
        self,
        message: str,
        *,
        rule: str,
        stage: int | None = None,
        node: str | None = None,
        device: str | None = None,
        numbers: dict[str, float] | None = None,
    ):
        self.rule = rule
        self.stage = stage
        self.node = node
        self.device = device
        self.numbers = dict(numbers or {})
        super().__init__(printable(message))


class FileWriteError(XEngineError, OSError):
    """A file could not be written (read-only, no space, a value JSON cannot hold).

    An :class:`OSError`, so callers that handle I/O errors handle it too; its message names the
    file and says what to do, on one line.
    """

    def __init__(self, path: str, what: str, fix: str = ""):
        self.path = path
        self.what = what
        self.fix = fix
        text = f"{path}: {what}; {fix}" if fix else f"{path}: {what}"
        super().__init__(printable(text))

    def __str__(self) -> str:
        return str(self.args[0])
