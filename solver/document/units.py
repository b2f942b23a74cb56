"""Sizes, bandwidths and their units, as written in graph files and on the command line.

``kB``/``MB``/``GB`` are powers of 1000 and ``KiB``/``MiB``/``GiB`` powers of 1024
(docs/formats.md). Parsing is exact: a size is an integer number of bytes, at most
:data:`MAX_SIZE`. Numbers are read with :class:`~decimal.Decimal` and their exponent is checked
before anything is computed, so ``"1e99999999 B"`` is refused at once instead of computing
10^(10^8) (issue 11).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

__all__ = ["MAX_SIZE", "parse_size", "parse_bandwidth", "format_size", "format_ms"]

MAX_SIZE = 2**53
"""The largest size accepted, in bytes (8 PiB). Every size and every sum of a few thousand of
them then fits numpy's int64 and is exact as a float; larger values are typos or attacks."""
_MAX_EXPONENT = 30
"""A number whose decimal exponent is above this is refused before it is computed."""
_MAX_DIGITS = 60
"""The longest number text read (a size needs 16 digits; more is a typo or an attack)."""

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(value: object) -> int:
    """Return a size in bytes from an integer or a string with a unit.

    Raises ``ValueError`` with a short reason (the caller adds the place).

    Examples
    --------
    >>> parse_size("4 MB"), parse_size("1.5 KiB"), parse_size(12)
    (4000000, 1536, 12)
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} is negative; sizes must be >= 0")
        return _at_most_max(value, value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a finite number of bytes; sizes must be >= 0")
        if value != int(value):
            raise ValueError(f"{value} is not a whole number of bytes")
        return parse_size(int(value))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a size; write bytes or a string such as '4 MiB'")
    text = value.strip()
    if text.startswith("-"):
        raise ValueError(f"{_short(value)} is negative; sizes must be >= 0")
    match = _NUMBER_UNIT.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(
            f"{_short(value)} is not a size; write bytes or a number with B, kB, MB, GB, KiB, "
            "MiB or GiB"
        )
    number = _bounded_decimal(match.group(1), value)
    exact = Fraction(number) * _UNITS[match.group(2).lower()]
    return _at_most_max(int(exact), value)  # a fraction of a byte is dropped


def _bounded_decimal(digits: str, value: object) -> Decimal:
    """``digits`` as a Decimal, refusing a huge exponent before anything is computed."""
    if len(digits) > _MAX_DIGITS:
        raise ValueError(f"{_short(value)} has too many digits; write at most {_MAX_DIGITS}")
    try:
        number = Decimal(digits)
    except InvalidOperation:
        raise ValueError(f"{_short(value)} is not a number") from None
    if number and number.adjusted() > _MAX_EXPONENT:
        raise ValueError(f"{_short(value)} is too large; sizes must be at most {MAX_SIZE} bytes")
    if number and number.adjusted() < -_MAX_EXPONENT:
        return Decimal(0)  # far below one byte even in TiB: no need to compute 10^-exponent
    return number


def _at_most_max(size: int, value: object) -> int:
    if size > MAX_SIZE:
        raise ValueError(f"{_short(value)} is too large; sizes must be at most {MAX_SIZE} bytes")
    return size


def _short(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters so a 10 MB string makes a one-line message."""
    if isinstance(value, int) and value.bit_length() > 128:
        digits = int(value.bit_length() * math.log10(2)) + 1  # str() refuses > 4300 digits
        return f"an integer of about {digits} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_bandwidth(value: object) -> float:
    """Return a bandwidth in bytes per second from a number or a string such as ``"12 GB/s"``.

    Examples
    --------
    >>> parse_bandwidth("12 GB/s"), parse_bandwidth(1e9)
    (12000000000.0, 1000000000.0)
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a bandwidth")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            raise ValueError(f"{_short(value)} is too large for a bandwidth") from None
        if not math.isfinite(number) or number <= 0:
            raise ValueError(f"{_short(value)} is not a positive bandwidth")
        return number
    if not isinstance(value, str) or not value.strip().endswith("/s"):
        raise ValueError(
            f"{_short(value)} is not a bandwidth; write bytes per second or e.g. '12 GB/s'"
        )
    size = parse_size(value.strip()[:-2])
    if size <= 0:
        raise ValueError(f"{_short(value)} is not a positive bandwidth")
    return float(size)


def format_size(num_bytes: float) -> str:
    """Format bytes with a binary unit for display, e.g. ``2.0 GiB``.

    Units go up to PiB, as sizes do (:data:`MAX_SIZE`), so a host's 2 TB reads ``1.8 TiB``
    rather than ``1.86e+03 GiB``; three significant digits never turn into an exponent.

    Examples
    --------
    >>> format_size(1536), format_size(3 * 1024**3), format_size(12)
    ('1.5 KiB', '3.0 GiB', '12 B')
    >>> format_size(2 * 10**12), format_size(1000 * 1024**2), format_size(2**53)
    ('1.8 TiB', '1000 MiB', '8.0 PiB')
    """
    value = float(num_bytes)
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            break
        value /= 1024
    if unit == "B":
        return f"{int(round(value))} B"
    if abs(value) >= 100:
        return f"{value:.0f} {unit}"
    return f"{value:.1f} {unit}"


def format_ms(ms: float) -> str:
    """Format a duration in milliseconds for display.

    Examples
    --------
    >>> format_ms(0.25), format_ms(12.5), format_ms(2500)
    ('0.25 ms', '12.5 ms', '2.50 s')
    """
    if abs(ms) >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.3g} ms"
