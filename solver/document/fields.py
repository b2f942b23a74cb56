"""Typed readers of document fields: each returns the value or raises a one-line error.

Shared by :mod:`solver.document.graph_io` and :mod:`solver.document.schedule_io`. Every error is a
:class:`GraphFormatError` naming the place (``where``) and the fix; the schedule reader turns it
into a :class:`ScheduleFormatError`. Values are shown through :func:`short_repr`, so a huge value
from a file never floods a message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from solver.document.units import parse_size
from solver.errors import GraphFormatError

__all__ = [
    "field_error",
    "get_field",
    "number_field",
    "object_field",
    "short_repr",
    "size_field",
]


def field_error(what: str, where: str, fix: str = "") -> GraphFormatError:
    return GraphFormatError(what, where=where, fix=fix)


def get_field(obj: Mapping, key: str, where: str, kind: type | tuple, default: Any = ...) -> Any:
    if key not in obj:
        if default is ...:
            raise field_error(f"missing field '{key}'", where, f"add '{key}'")
        return default
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _as_tuple(kind):
        names = " or ".join(t.__name__ for t in _as_tuple(kind)).replace("str", "string")
        raise field_error(
            f"field '{key}' is {type(value).__name__}", where, f"it must be a {names}"
        )
    return value


def _as_tuple(kind: type | tuple) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


def size_field(value: Any, where: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise field_error(
            str(exc).split("; ")[0], where, _tail(exc, "sizes must be >= 0")
        ) from None


def _tail(exc: ValueError, default: str) -> str:
    parts = str(exc).split("; ", 1)
    return parts[1] if len(parts) > 1 else default


def number_field(value: Any, where: str, fix: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise field_error(f"{short_repr(value)} is not a number", where, fix)
    try:
        number = float(value)
    except OverflowError:
        raise field_error("the number is too large for a float", where, fix) from None
    if not math.isfinite(number):
        raise field_error(f"{number!r} is not a finite number", where, fix)
    if number < 0:
        raise field_error(f"{number} is negative", where, fix)
    return number


def short_repr(value: Any, limit: int = 40) -> str:
    """A repr cut to one short line (ids and values come from files of any size)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return "a very large integer"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def object_field(value: Any, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise field_error(f"expected an object, got {type(value).__name__}", where, "write {...}")
    return value
