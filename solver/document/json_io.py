"""Reading and writing JSON documents safely (docs/formats.md, limits in docs/spec-notes.md).

:func:`read_json` reads only regular files of at most :data:`MAX_FILE_BYTES`, nested at most
:data:`MAX_DEPTH` deep, and refuses NaN, Infinity and numbers out of a float's range, so no input
ends in a traceback or a hang. :func:`dumps_json` never writes NaN or Infinity;
:func:`write_json` writes atomically (:mod:`solver.document.atomic`).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterable
from typing import Any

from solver.document.atomic import atomic_write_bytes
from solver.document.units import format_size
from solver.errors import FileWriteError, GraphFormatError

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "dumps_json",
    "read_json",
    "read_regular_file",
    "write_json",
]

MAX_FILE_BYTES = 64 * 1024**2
"""The largest file read (64 MiB; the biggest bundled graph is 50 kB). A cap keeps ``/dev/zero``
or a huge file from filling memory."""
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects accepted (the formats need 5 levels)."""
_MAX_INT_DIGITS = 300
"""Integers with more digits are refused while parsing (no float holds them)."""


def read_json(path: str | os.PathLike, error: type[GraphFormatError] = GraphFormatError) -> Any:
    """Parse a JSON file, turning every way it can fail into a format error naming the place.

    Only regular files are read (a FIFO would block, ``/dev/zero`` never ends), at most
    :data:`MAX_FILE_BYTES`; NaN, Infinity, floats out of range, integers of more than 300
    digits and nesting deeper than :data:`MAX_DEPTH` are refused.
    """
    name = str(path)
    data = read_regular_file(path, error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise error("not a UTF-8 text file", path=name, fix="save it as UTF-8 JSON") from None
    try:
        doc = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_checked_float,
            parse_int=_checked_int,
        )
    except json.JSONDecodeError as exc:
        raise error(
            exc.msg,
            path=name,
            where=f"line {exc.lineno}, column {exc.colno}",
            fix="fix the JSON syntax there",
        ) from None
    except _BadNumber as exc:
        raise error(exc.what, path=name, where=_locate(text, exc.token), fix=exc.fix) from None
    except RecursionError:
        too_deep = True  # the parser's own recursion limit
    else:
        too_deep = _too_deep(doc)
    if too_deep:
        raise error(
            f"nested more than {MAX_DEPTH} levels deep",
            path=name,
            fix="graph and schedule files need about 5 levels",
        )
    return doc


class _BadNumber(ValueError):
    """A number JSON should not hold, found while parsing (the caller adds the line)."""

    def __init__(self, token: str, what: str, fix: str):
        super().__init__(what)
        self.token, self.what, self.fix = token, what, fix


def _refuse_constant(token: str) -> float:
    raise _BadNumber(token, f"{token} is not a JSON number", "write a finite number")


def _checked_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _BadNumber(token, f"{token[:30]} is out of range", "write a number below 1e308")
    return value


def _checked_int(token: str) -> int:
    if len(token.lstrip("-")) > _MAX_INT_DIGITS:
        digits = len(token.lstrip("-"))
        raise _BadNumber(token, f"an integer of {digits} digits", "write a smaller number")
    return int(token)


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)')


def _locate(text: str, token: str) -> str:
    """``line L, column C`` of the first ``token`` outside a string (the error path only)."""
    for match in _TOKEN.finditer(text):
        if match.group(1) == token:
            pos = match.start()
            line = text.count("\n", 0, pos) + 1
            column = pos - text.rfind("\n", 0, pos)
            return f"line {line}, column {column}"
    return ""


def _too_deep(doc: Any) -> bool:
    """Whether ``doc`` nests deeper than :data:`MAX_DEPTH` (iteratively: no recursion)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def read_regular_file(
    path: str | os.PathLike,
    error: type[GraphFormatError] = GraphFormatError,
    max_bytes: int | None = None,
    fix: str = "graph and schedule files are far smaller; is this the right file?",
    what: str = "a JSON file",
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (default :data:`MAX_FILE_BYTES`);
    never blocks, never fills memory.

    A FIFO with no writer blocked forever and ``/dev/zero`` never ended: anything but a
    regular file is refused before it is opened for reading (``O_NONBLOCK`` keeps a path
    swapped for a FIFO since the check from blocking the open), and at most ``max_bytes + 1``
    bytes are read. Every failure is ``error`` naming the file (``fix`` for one too large,
    "give ``what``" for one that is no regular file).
    """
    name = str(path)
    max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise error(
                "not a regular file (a folder, device or pipe)", path=name, fix=f"give {what}"
            )
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise error("not a regular file", path=name, fix=f"give {what}")
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise error(exc.strerror or str(exc), path=name, fix="check the path") from None
    if len(data) > max_bytes:
        raise error(f"larger than {format_size(max_bytes)}", path=name, fix=fix)
    return data


def dumps_json(doc: Any, path: str | os.PathLike = "<document>") -> str:
    """``doc`` as indented JSON text; NaN and Infinity are refused (JSON has neither).

    Raises
    ------
    FileWriteError
        Naming ``path`` and the place of the first non-finite number.
    """
    try:
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"
    except ValueError:
        where = _non_finite_place(doc) or "a number"
        raise FileWriteError(
            str(path),
            f"{where} is not a finite number, which JSON cannot hold",
            "nothing was written; this is a bug, please report it",
        ) from None


def write_json(doc: Any, path: str | os.PathLike) -> None:
    """Write ``doc`` as JSON to ``path`` atomically (see :func:`dumps_json`).

    A document larger than :data:`MAX_FILE_BYTES` is refused and nothing is written: this
    program would refuse to read it back (a 276 MB schedule that ``check`` refused was
    written before).

    Raises
    ------
    FileWriteError
        Naming ``path``: a non-finite number, a document too large, or the write failed.
    """
    data = dumps_json(doc, path).encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise FileWriteError(
            str(path),
            f"nothing written: the document would be {format_size(len(data))}, more than the "
            f"{format_size(MAX_FILE_BYTES)} a graph or schedule file may have (it could not be "
            "read back)",
            "use a smaller graph (e.g. import at --level layer)",
        )
    atomic_write_bytes(path, data)


def _non_finite_place(doc: Any) -> str | None:
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, place = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"'{place}' ({value})" if place else str(value)
        if isinstance(value, dict):
            stack.extend((v, f"{place}.{k}" if place else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{place}[{i}]") for i, v in enumerate(value))
    return None
