"""What the commands print: a solve's report (text or JSON), warnings, and a clean stdout.

stdout carries the result only (a table, or one JSON document that a script can parse);
notes, warnings, progress and the one ``error:`` line go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
from collections.abc import Iterator

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.document.units import format_ms, format_size
from solver.errors import printable
from solver.execution.concurrent import concurrent_makespan
from solver.execution.simulate import Timeline
from solver.optimize.incumbents import MEETS_A_BOUND
from solver.optimize.solve import SolveResult
from solver.status import SolveStatus

__all__ = [
    "concurrent_ms",
    "json_text",
    "ms_or_dash",
    "print_result",
    "report",
    "stdout_to_stderr",
    "warnings_to_stderr",
]


def concurrent_ms(
    graph: Graph, schedule: Schedule | None, timeline: Timeline | None
) -> float | None:
    """The concurrent-execution estimate (solver/execution/concurrent.py) of a valid replay.

    None when there is no schedule or its replay is invalid.
    """
    if schedule is None or timeline is None or not timeline.valid:
        return None
    return round(concurrent_makespan(graph, schedule, timeline), 6)


def ms_or_dash(ms: float | None) -> str:
    """A time, or ``-`` where there is none."""
    return "-" if ms is None else format_ms(ms)


def report(result: SolveResult, concurrent: float | None = None) -> dict:
    """``solve --json``: the solver block and the simulator's summary (docs/formats.md)."""
    block: dict[str, object] = {
        "method": result.method,
        "backend": result.backend,
        "status": result.status.value,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "seconds": round(result.seconds, 3),
        "build_seconds": round(result.build_seconds, 3),
        "variables": result.variables,
        "constraints": result.constraints,
        "message": result.message,
        "formulation": result.formulation,
        "advice": result.advice,
    }
    if result.restricted is not None:
        block["restricted"] = {
            "runs_per_node": result.restricted.runs,
            "bound": result.restricted.bound,
            "proven": result.restricted.proven,
        }
    if result.timeline is not None:
        block["summary"] = result.timeline.summary()
        block["concurrent_ms"] = concurrent
    return block


def print_result(result: SolveResult, concurrent: float | None = None) -> None:
    """``solve`` without ``--json``: one labelled line per fact."""
    how = result.backend or "heuristic"
    if not result.backend and result.status is SolveStatus.INFEASIBLE and result.schedule is None:
        how = "no solver run: proven before any model was built"
    closed = result.status is SolveStatus.OPTIMAL and MEETS_A_BOUND in result.message
    if closed and result.backend and not result.variables and not result.formulation:
        how = f"{result.backend} stopped before it built a model: proven beside it"
    print(f"method     {result.method} ({how})")
    print(f"status     {result.status.value}")
    if result.message and not result.ok:
        print(printable(f"why        {result.message}"))
    elif closed:  # who proved it, when not the backend
        proof = result.message[result.message.index(MEETS_A_BOUND) :]
        print(printable(f"proof      {proof}"))
    if result.timeline is None:
        if result.advice:  # how much memory would do, for a result without a schedule
            print(printable(f"advice     {result.advice}"))
        return
    t = result.timeline
    bound = f", bound {result.bound:.6g}, gap {result.gap:.2%}" if result.gap is not None else ""
    print(
        f"time       {format_ms(t.total_ms)} (compute {format_ms(t.compute_ms)}, "
        f"transfers {format_ms(t.transfer_ms)}){bound}"
    )
    if concurrent is not None:
        print(f"concurrent {format_ms(concurrent)} (devices and links in parallel)")
    print(
        f"recompute  {t.recomputations} operations, {format_ms(t.recompute_ms)}; "
        f"{len(t.transfers)} transfers"
    )
    offloads = [tr for tr in t.transfers if tr.offload]
    if offloads:
        ms = sum(tr.end - tr.start for tr in offloads)
        print(f"offload    {len(offloads)} copies kept on another device, {format_ms(ms)}")
    for device, peak in t.peaks.items():
        budget = t.activation_budgets[device]
        share = f" ({peak / budget:.0%})" if budget else ""
        print(f"memory     {device}: peak {format_size(peak)} of {format_size(budget)}{share}")
    for device, limit in t.saved_limits.items():  # what --saved bounds, as the replay measured it
        held = t.saved_bytes.get(device, 0)
        print(
            f"saved      {device}: {format_size(held)} held when the backward starts, "
            f"of {format_size(limit)}"
        )
    model = f", {result.formulation}" if result.formulation else ""
    if result.variables or result.constraints:
        size = f"{result.variables} variables, {result.constraints} constraints{model}"
    elif result.formulation:  # its build stopped at the time limit or on cancel
        size = f"the {result.formulation} model was not built"
    else:
        size = "no model"
    print(f"solved in  {result.seconds:.2f} s ({size})")
    if (
        result.restricted is not None
        and result.restricted.proven
        and result.status is not SolveStatus.OPTIMAL  # then it says no more than "optimal"
    ):
        print(printable(f"restricted {result.restricted.describe()}"))
    if result.advice:
        print(printable(f"advice     {result.advice}"))


def json_text(doc: dict) -> str:
    """One JSON document for stdout; a non-finite number (a sum of costs near 1e308 that
    overflowed) is written as null, since JSON has no Infinity or NaN."""
    return json.dumps(_finite(doc), indent=1, allow_nan=False)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what native code prints (HiGHS's banner) to stderr, so stdout stays pure output."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class _WarningLines(logging.Handler):
    """The core's warnings (the result store's) as one ``warning: ...`` line each on stderr,
    told apart from the one ``error:`` line a failed command ends with."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(printable(f"warning: {record.getMessage()}"), file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging's own contract: never raise from emit
            self.handleError(record)


def warnings_to_stderr() -> None:
    """Route the ``solver`` loggers' warnings to stderr, once (main runs many times in tests)."""
    core = logging.getLogger("solver")
    if not any(isinstance(h, _WarningLines) for h in core.handlers):
        core.addHandler(_WarningLines(logging.WARNING))
