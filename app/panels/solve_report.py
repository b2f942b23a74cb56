"""What a solve's outcome means for the user: the gap, the model's size, an idle budget, advice.

A weak result used to say nothing: ResNet-50 at 60 % with CBC and 25 s ended at a 19 % gap with
half the GPU budget unused, and the log showed CBC's MPS reader ("At line 341751 COLUMNS").
:func:`result_notes` turns a :class:`SolveResult` into a few sentences a user can act on (the
solver's own ``advice`` when it has one, else advice derived from status, gap, bound and model
size); :func:`readable_log_line` turns the backend's log lines into progress a user can read,
and drops the reader's noise. No Qt here.
"""

from __future__ import annotations

import re

from solver.document.units import format_ms, format_size
from solver.optimize.advice import for_the_window
from solver.optimize.incumbents import MEETS_A_BOUND
from solver.optimize.solve import SolveResult
from solver.status import SolveStatus

__all__ = ["IDLE_SHARE", "idle_budgets", "readable_log_line", "result_notes", "unused_budgets"]

IDLE_SHARE = 0.6
"""A device whose peak stays below this share of its activation budget is called idle."""
BIG_MODEL = 200_000
"""Variables beyond which CBC seldom closes the gap in a minute on this kind of machine."""

_CBC_NODES = re.compile(
    r"Cbc0010I After (\d+) nodes, \d+ on tree, (\S+) best solution, best possible (\S+) "
    r"\(([\d.]+) seconds\)"
)
_CBC_FOUND = re.compile(r"Cbc00(?:04|12)I Integer solution of (\S+) found(?: by (\S+))?")
_CBC_ROWS = re.compile(r"Problem .* has (\d+) rows, (\d+) columns")
_CBC_RESULT = re.compile(r"^Result - (.*)$")
_NOISE = (
    re.compile(r"^(Coin0001I )?At line \d+"),  # the MPS reader, one line per section
    re.compile(r"^Coin000[2-9]I"),
    re.compile(r"^Clp\d+I"),  # LP iterations
    re.compile(r"^Cgl\d+I"),  # cut generators
    re.compile(r"^Cbc0038I"),  # heuristic pass details
    re.compile(r"^Cbc0013I|^Cbc0014I|^Cbc0045I|^Cbc0031I"),
    re.compile(r"^\s*$"),
)


def readable_log_line(line: str) -> str | None:
    """``line`` of a backend's log as a user reads it, or ``None`` for noise.

    >>> readable_log_line("At line 341751 COLUMNS") is None
    True
    >>> readable_log_line(
    ...     "Cbc0010I After 300 nodes, 12 on tree, 512.5 best solution, "
    ...     "best possible 430.1 (21.3 seconds)")
    '21.3 s: 300 branches searched; best schedule 512.5 ms, none faster than 430.1 ms (gap 16 %)'
    >>> readable_log_line("Cbc0012I Integer solution of 600.25 found by DiveCoefficient after 0 "
    ...     "iterations and 0 nodes (3.20 seconds)")
    'found a schedule of 600.25 ms (DiveCoefficient)'
    >>> readable_log_line("Problem MODEL has 1200 rows, 800 columns and 5000 elements")
    'model read: 1,200 constraints, 800 variables'
    """
    text = line.strip()
    match = _CBC_NODES.search(text)
    if match:
        nodes, best, bound, seconds = match.groups()
        best_value, bound_value = float(best), float(bound)
        if best_value >= 1e49:
            return f"{seconds} s: {nodes} branches searched; no schedule yet, bound {bound} ms"
        gap = (best_value - bound_value) / best_value if best_value else 0.0
        return (
            f"{seconds} s: {nodes} branches searched; best schedule {best} ms, none faster "
            f"than {bound} ms (gap {100 * gap:.0f} %)"
        )
    match = _CBC_FOUND.search(text)
    if match:
        how = f" ({match[2]})" if match[2] else ""
        return f"found a schedule of {match[1]} ms{how}"
    match = _CBC_ROWS.search(text)
    if match:
        return f"model read: {int(match[1]):,} constraints, {int(match[2]):,} variables"
    match = _CBC_RESULT.match(text)
    if match:
        return f"CBC: {match[1].lower()}"
    if any(pattern.search(text) for pattern in _NOISE):
        return None
    return text


def idle_budgets(result: SolveResult, no_remat_peak: int | None = None) -> dict[str, float]:
    """Devices whose peak stayed below :data:`IDLE_SHARE` of their activation budget, with the
    share used; empty when nothing was idle or the schedule is missing. With the graph's
    ``no_remat_peak``, a budget at or above it does not count: keeping everything fits there,
    so room left over says nothing about the solve (a 64 GiB host always looks idle)."""
    timeline = result.timeline
    if timeline is None:
        return {}
    shares = {}
    peaks = timeline.peaks
    used = {op.device for op in timeline.ops}
    for device, budget in timeline.activation_budgets.items():
        if budget <= 0 or device not in used:
            continue  # a device left out entirely says so in the devices panel
        if no_remat_peak is not None and budget >= no_remat_peak:
            continue
        share = peaks.get(device, 0) / budget
        if share < IDLE_SHARE:
            shares[device] = share
    return shares


def unused_budgets(result: SolveResult, no_remat_peak: int | None = None) -> dict[str, int]:
    """Devices with an activation budget that run no operation at all, with the budget (as in
    :func:`idle_budgets`, a budget at or above ``no_remat_peak`` does not count)."""
    timeline = result.timeline
    if timeline is None:
        return {}
    used = {op.device for op in timeline.ops}
    return {
        device: budget
        for device, budget in timeline.activation_budgets.items()
        if budget > 0 and device not in used and (no_remat_peak is None or budget < no_remat_peak)
    }


def result_notes(result: SolveResult, no_remat_peak: int | None = None) -> list[str]:
    """Plain sentences on what a finished (or running) solve's result means, weakest first.

    Nothing to say for an optimal result that used its budget, or for a heuristic (no model
    was solved, so nothing was cut short): an empty list. ``no_remat_peak`` as in
    :func:`idle_budgets`.
    """
    notes: list[str] = []
    built = result.variables > 0 or result.gap is not None
    # a solver ran (a model was built or its building ran out of time), not a heuristic alone
    solver_ran = built or result.backend.lower() not in ("", "heuristic")
    cut_short = solver_ran and result.status in (SolveStatus.FEASIBLE, SolveStatus.CANCELLED)
    if cut_short and result.ok and not built:
        # the limit ran out before the model was solved (ResNet-size op-level imports under a
        # short limit): the first heuristic schedule, possibly many times the best
        why = f" ({result.message})" if result.message else ""
        notes.append(
            f"The solve ended before its model was solved{why}: the best schedule of the "
            "heuristics and the construction, possibly far from the best."
        )
    elif cut_short and result.gap is not None and result.gap > 0:
        how = "Cancelled" if result.status is SolveStatus.CANCELLED else "Stopped at its limit"
        bound = f" (none faster than {format_ms(result.bound)})" if result.bound else ""
        gap = f"{100 * result.gap:.3g} %"
        notes.append(f"{how} with a gap of {gap}: up to {gap} slower than the best{bound}.")
    elif cut_short and result.ok:
        notes.append("The solve was cut short: this schedule is not proven the fastest.")
    if cut_short:
        for device, share in idle_budgets(result, no_remat_peak).items():
            budget = result.timeline.activation_budgets[device]
            notes.append(
                f"{device} uses {share:.0%} of its {format_size(budget)} activation budget: "
                "the solve ended before it could use the rest."
            )
        for device, budget in unused_budgets(result, no_remat_peak).items():
            notes.append(
                f"{device} runs nothing: the solve ended before it could use its "
                f"{format_size(budget)} activation budget."
            )
    if result.status is SolveStatus.OPTIMAL and MEETS_A_BOUND in result.message:
        # proven beside the model (the exact search, the relaxation): say by what, since the
        # model's line below would otherwise read as the proof
        notes.append(_as_sentence(result.message[result.message.index(MEETS_A_BOUND) :]))
    if result.variables or result.constraints:
        model = f"{result.variables:,} variables, {result.constraints:,} constraints"
        # "Model: retention intervals (C=2), ...": in brackets, its own brackets nested
        formulation = f"{result.formulation}, " if result.formulation else ""
        notes.append(f"Model: {formulation}{model}.")
    # the solver names options by their flags (--runs 3); here they are the panel's controls
    advice = for_the_window(result.advice) or _derived_advice(result, cut_short)
    if advice.startswith("the gap is ") and any(" with a gap of " in n for n in notes):
        # said once: at 1280x720 the repeated gap pushed the live plot's time axis off the dock
        advice = advice.split(": ", 1)[-1]
    if advice:
        notes.append(_as_sentence(advice))
    return notes


def _derived_advice(result: SolveResult, cut_short: bool) -> str:
    """What would help, from status, gap and model size, when the solver said nothing."""
    if result.status is SolveStatus.INFEASIBLE:
        return "Raise a device's memory limit above its lower bound, or allow offloading."
    if cut_short and not result.variables and result.gap is None:
        return "A longer time limit would let the model be solved."
    if not cut_short or not result.gap:
        return ""
    if result.variables > BIG_MODEL and result.backend.lower() == "cbc":  # results say "CBC"
        return (
            "The model is large for CBC: try HiGHS, a longer time limit, or a coarser graph "
            "(layer level instead of op level)."
        )
    return "A longer time limit would narrow the gap."


def _as_sentence(text: str) -> str:
    """The solver's advice is a clause for the command line ("the solve was cut short while
    ..."): in the panel, among sentences, it starts with a capital and ends with a stop."""
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
