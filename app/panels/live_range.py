"""Axis ranges of the solver panel's live plot that change seldom, so its axes are not redrawn.

pyqtgraph regenerates an axis (ticks, labels, grid) whenever its range changes, and with auto
range the live plot's range changed with every progress batch: 10 times a second, up to 30 ms
of painting each on the GUI thread (measured with a solve of VGG16). These ranges only grow, in
steps: time to the next 1-2-5 value past the latest report, the objective axis by a margin
around the values when one leaves it. Between steps only the curves are repainted.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["time_range", "value_range"]


def _nice_above(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is >= ``value`` (> 0).

    >>> _nice_above(0.3), _nice_above(7.0), _nice_above(10.0), _nice_above(11.0)
    (0.5, 10.0, 10.0, 20.0)
    """
    exponent = math.floor(math.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        candidate = step * 10.0**exponent
        if candidate >= value * (1 - 1e-12):
            return candidate
    return 10.0 ** (exponent + 1)


def time_range(current: tuple[float, float] | None, latest_s: float) -> tuple[float, float]:
    """The time axis: kept while ``latest_s`` fits, else ``0`` to the next 1-2-5 step past it.

    >>> time_range(None, 0.3), time_range((0.0, 0.5), 0.45), time_range((0.0, 0.5), 0.6)
    ((0.0, 0.5), (0.0, 0.5), (0.0, 1.0))
    """
    if current is not None and latest_s <= current[1]:
        return current
    return 0.0, _nice_above(max(latest_s * 1.05, 1e-3))


def value_range(
    current: tuple[float, float] | None, values: np.ndarray
) -> tuple[float, float] | None:
    """The objective axis: kept while the finite ``values`` fit, else 10 % around them.

    >>> value_range(None, np.array([100.0, 80.0]))
    (78.0, 102.0)
    >>> value_range((78.0, 102.0), np.array([90.0, np.nan]))
    (78.0, 102.0)
    >>> value_range((78.0, 102.0), np.array([60.0]))
    (55.8, 106.2)
    >>> value_range(None, np.array([np.nan])) is None
    True
    """
    finite = values[np.isfinite(values)]
    if not len(finite):
        return current
    lo, hi = float(finite.min()), float(finite.max())
    if current is not None and current[0] <= lo and hi <= current[1]:
        return current
    if current is not None:
        lo, hi = min(lo, current[0]), max(hi, current[1])
    margin = 0.1 * (hi - lo) or 0.05 * abs(hi) or 1.0
    return round(lo - margin, 12), round(hi + margin, 12)
