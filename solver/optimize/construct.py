"""A schedule at once: checkpoint everything, then drop what overflows and recompute it.

Before any model is built a solve needs a valid schedule to show and to improve, and on large
graphs the baselines often have none: checkpoint-all needs the no-rematerialization peak, and
Chen's segments assume a chain-like forward pass (Moccasin's random layered graphs at 0.8 of
their peak left every baseline without a schedule). This construction works on any DAG and
any placement of nodes on devices.

The schedule comes from :class:`~solver.optimize.repair.Repair`: checkpoint-all, then drops of
what overflows, each recomputed where it is read next (that module says how).

:func:`construct_best` runs the repair over a few placements (every node on one device that
can run them all, and each node on its cheapest device that can hold it with its inputs,
which spills what is too big for the fast device) and returns the cheapest schedule that
replays validly.
Nothing here is optimal; it is fast and it fails only where no drop helps.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.document.units import format_size
from solver.execution.simulate import Timeline, simulate
from solver.optimize.backends._common import Cancel
from solver.optimize.bounds import devices_for, node_requirement
from solver.optimize.fit_search import FitSearch, FitSearcher
from solver.optimize.join_search import mend
from solver.optimize.repair import Repair, stopped

__all__ = ["Construction", "construct", "construct_best", "placements", "schedule_from_keeps"]

GREEDS = (("per-ms", 16), ("per-ms", 48), ("relief", 48))
"""How a repair picks among helpful drops, and how many it evaluates per batch: the most
overflow removed per millisecond of recomputation (cheap schedules) among few, then among
more when that gets stuck, then the most overflow removed."""
SPILLS = 8
"""Operations a stuck repair of a mixed placement moves to another device, at most."""
RESTART_SECONDS = 3.0
"""A placement every greed leaves stuck is repaired again with chance in its choices (each
restart picks among the best few drops at random, seeded 1, 2, ...) for at most this long."""
MEND_SECONDS = 3.0
"""How long a one-device repair every greed left stuck is mended by a search that joins its
keep sets (:mod:`solver.optimize.join_search`), before the searches and restarts below:
where it works it takes 0.1-3 s and its schedule recomputes far less than theirs."""
SEARCH_FIRST_SECONDS = 1.0
"""A one-device graph every greed leaves stuck, whose repair :data:`MEND_SECONDS` did not mend,
is searched for this long for any schedule that fits (:mod:`solver.optimize.fit_search`: it
finds one or proves there is none), then restarted (:data:`RESTART_SECONDS`: the search's
schedules recompute a lot, a restart's less), then, if neither found one, searched again for
:data:`SEARCH_MORE_SECONDS`: 10 s in all."""
WIDER = GREEDS[1]
"""The greed of the wider repair (:func:`construct_best`'s ``widen_until``): the most overflow
removed per millisecond among 48 candidates a drop instead of 16."""
WIDER_COST = 3.0
"""How many times the first repair's time the wider one is taken to need (judged before it
starts): 0.2-5 times on random graphs of 500 and 1,000 nodes, 2.8 on a 2,557-op tower."""
SEARCH_MORE_SECONDS = 3.0
"""How long the search goes on after the restarts failed (at most, and not past the deadline):
a stuck graph then has had 10 s, the issue's "a schedule within 10 s", and the solve's
backends get the rest (CP-SAT finds a first schedule on some graphs where the search needs
40 s: a 100-node random graph of width 0.5 sqrt(n) at 0.8, seed 3)."""


def _ends_by(until: float | None, seconds: float) -> bool:
    """Whether work taking ``seconds`` from now ends by ``until`` (``None``: no limit)."""
    return until is None or time.monotonic() + seconds <= until


@dataclass(frozen=True)
class Construction:
    """A constructed schedule with its replay, or the reason there is none."""

    schedule: Schedule | None
    timeline: Timeline | None
    reason: str = ""
    seconds: float = 0.0
    infeasible: bool = False
    """Whether ``reason`` is a proof that no schedule fits (the backward search ran out)."""


def placements(graph: Graph) -> list[list[int]]:
    """The placements worth constructing from, the most promising first: the cheapest
    placement (each node on its cheapest device that can hold it with its inputs; a node too
    big for the fast device spills to the next), then every node on one device that can run
    them all, the device with the least plain cost first."""
    cheapest: list[int] | None = []
    for k in range(graph.n):
        able = devices_for(graph, k)
        if not able:
            cheapest = None
            break
        assert cheapest is not None
        cheapest.append(min(able)[1])
    singles = []
    for d, device in enumerate(graph.devices):
        if all(
            not math.isnan(graph.cost[d, k])
            and node_requirement(graph, k) <= device.activation_budget
            for k in range(graph.n)
        ):
            with np.errstate(over="ignore"):  # a cost of 1e308 sums to inf: last, no warning
                singles.append((float(np.nansum(graph.cost[d])), d))
    found = [cheapest] if cheapest is not None else []
    for _, d in sorted(singles):
        if [d] * graph.n not in found:
            found.append([d] * graph.n)
    return found


def construct(
    graph: Graph,
    placement: Sequence[int],
    method: str = "construct",
    deadline: float | None = None,
) -> Schedule | None:
    """The repaired schedule that runs node ``k`` on device ``placement[k]``, or ``None``
    when some stage still overflows and no drop helps (or ``deadline`` passed first).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.execution.simulate import simulate
    >>> g = unit_chain(4, budget=3)
    >>> timeline = simulate(g, construct(g, [0] * g.n))
    >>> timeline.valid, timeline.total_ms
    (True, 15.0)
    """
    repair = _repaired(graph, placement, deadline)
    return None if repair is None else repair.schedule(method)


def construct_best(
    graph: Graph,
    deadline: float | None = None,
    cancel: Cancel | None = None,
    alternatives_until: float | None = None,
    repair_until: float | None = None,
    widen_until: float | None = None,
    on_schedule: Callable[[Construction], None] | None = None,
) -> Construction:
    """The cheapest valid schedule over :func:`placements`, replayed by the simulator.

    A placement whose plain cost (every node once where it is placed) is already above the
    cheapest repaired schedule is not repaired (repairing only adds recomputation), and only
    the cheapest repaired schedule is replayed (the next if it failed to replay, which would
    be a defect here): replaying a 2,000-node schedule takes seconds. That one is first
    tightened (:meth:`Repair.tighten`: what now fits is kept instead of recomputed).

    Once a placement is repaired, the next one is started only if it would end, taking as
    long as the longest repair so far, before ``alternatives_until`` (``None``: the
    deadline): an alternative to a schedule in hand is worth less than the time a solver
    would get to improve it (a 5,107-operation tower repairs its second placement in 16 s,
    to a dearer schedule).

    While no placement has a schedule, a repair may run until ``repair_until`` (``None``, or
    earlier than ``deadline``: the deadline). On the largest graphs the first repair is the
    only good schedule within reach, and one stopped before it ends leaves nothing: a
    5,107-operation tower solved for 30 s, whose repair takes about 22 s, ended with
    checkpoint-all's 485 ms where the repair gives 61.7 ms. Nothing else here runs past
    ``deadline``.

    With ``widen_until``, a first placement repaired by the first greed is repaired again with
    :data:`WIDER` if that would end by then (taking :data:`WIDER_COST` times as long), and
    the cheaper schedule is returned: weighing three times as many drops at each step, it
    recomputes less (cheaper on 28 of the 32 random graphs of 500 and 1,000 nodes at 0.8 that
    both greeds repaired, by up to 73 %; 0.4 % on a 2,557-op tower), and on graphs that large
    the model improves little on the construction within a minute. ``on_schedule`` hears the
    first schedule, replayed, before that repair starts (only then): it is what a user waiting
    for "a schedule at once" sees.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> found = construct_best(unit_chain(4, budget=3))
    >>> found.timeline.valid, found.timeline.total_ms
    (True, 15.0)
    """
    started = time.monotonic()
    first_repair: tuple[Repair | None, float] = (None, 0.0)
    built: list[tuple[float, int, Repair]] = []
    reasons: list[str] = []
    longest = 0.0  # the longest repair so far, in seconds
    stuck: list[list[int]] = []  # placements no greed repaired
    stuck_repairs: list[Repair] = []  # where each greed stopped on them
    alternatives_until = deadline if alternatives_until is None else alternatives_until
    late = deadline if repair_until is None or deadline is None else max(deadline, repair_until)
    for number, placement in enumerate(placements(graph)):
        if built and (stopped(deadline, cancel) or not _ends_by(alternatives_until, longest)):
            break
        cheapest = min((ms for ms, _, _ in built), default=math.inf)
        where = "one device" if len(set(placement)) == 1 else "the cheapest placement"
        spill = number == 0 and graph.num_devices > 1  # the cheapest placement may spill
        begun = time.monotonic()
        until = deadline if built else late
        repair = _repaired(graph, placement, until, spill, cancel, stuck_repairs)
        longest = max(longest, time.monotonic() - begun)
        if number == 0:
            first_repair = (repair, time.monotonic() - begun)
        if repair is None:
            if stopped(until, cancel):
                reasons.append(f"on {where}, stopped by the time limit or a cancel")
                break
            reasons.append(f"on {where}, some stage overflows and no drop helps")
            stuck.append(placement)
            continue
        if repair.plain_ms >= cheapest:
            continue
        built.append((repair.predicted_ms(), number, repair))
    if not built and stuck and not stopped(deadline, cancel):
        searcher = FitSearcher(graph) if graph.num_devices == 1 else None

        def search_on(seconds: float) -> FitSearch:
            """The search for ``seconds`` more (not past the deadline); what it finds is built."""
            assert searcher is not None
            until = time.monotonic() + seconds
            found = searcher.run(until if deadline is None else min(until, deadline), cancel)
            if found.keeps is not None:
                repair = Repair.from_keeps(graph, [0] * graph.n, found.keeps)
                built.append((repair.predicted_ms(), 1, repair))
            return found

        # the stuck repair, mended where it overflows: the cheapest schedule of these, and
        # then nothing below runs
        mended = None
        if searcher is not None:
            mended = _mended(graph, stuck_repairs, deadline, cancel)
            if mended is not None:
                built.append((mended.predicted_ms(), 0, mended))
        # a short look first: it settles most stuck graphs either way in a second
        if not built and searcher is not None:
            searched = search_on(SEARCH_FIRST_SECONDS)
            if searched.proven:
                return _infeasible(graph, searched, started)
        # what the search finds fits but recomputes a lot: a restart may find a cheaper one
        restart_until = time.monotonic() + RESTART_SECONDS
        if deadline is not None:
            restart_until = min(restart_until, deadline)
        restarts = 0
        for placement in stuck if mended is None else []:
            repair, tried = _restarted(graph, placement, restart_until, cancel)
            restarts += tried
            if repair is not None:
                built.append((repair.predicted_ms(), 0, repair))
                break
        else:
            if not built:
                plural = "" if restarts == 1 else "s"
                reasons.append(f"nor in {restarts:,} restart{plural} with chance in its choices")
        if not built and searcher is not None and not stopped(deadline, cancel):
            searched = search_on(SEARCH_MORE_SECONDS)
            if searched.proven:
                return _infeasible(graph, searched, started)
        if not built and searcher is not None:
            reasons.append(
                f"a search for any schedule that fits stopped after {searched.states:,} "
                f"states ({searched.seconds:.1f} s)"
            )
    for _, _, repair in sorted(built, key=lambda item: item[:2]):
        _tighten(repair, started, late, cancel)
        found = _replayed(graph, repair, started)
        if found.timeline is None:
            reasons.append(found.reason)
            continue
        first, took = first_repair
        if (
            widen_until is None
            or first is not repair
            or (first.greed, first.candidates) != GREEDS[0]  # then it was no narrower
            or not _ends_by(widen_until, WIDER_COST * took)
        ):
            return found
        if on_schedule is not None:
            on_schedule(found)
        widened = Repair(graph, list(first.place), *WIDER)
        if not widened.run(widen_until if deadline is None else min(widen_until, deadline), cancel):
            return found
        _tighten(widened, started, late, cancel)
        if widened.predicted_ms() >= found.timeline.total_ms:
            return found
        better = _replayed(graph, widened, started)
        return better if better.timeline is not None else found
    why = "; ".join(reasons) or "no placement fits every node"
    return Construction(None, None, f"construction: {why}", time.monotonic() - started)


def _tighten(repair: Repair, started: float, late: float | None, cancel: Cancel | None) -> None:
    """:meth:`Repair.tighten`, at most as long again as the construction took so far (a
    500-node graph: 0.4 s, then 2 s)."""
    spent = max(1.0, time.monotonic() - started)
    repair.tighten(min(math.inf if late is None else late, time.monotonic() + spent), cancel)


def _replayed(graph: Graph, repair: Repair, started: float) -> Construction:
    """The repair's schedule replayed by the simulator (``timeline`` None, with the reason, if
    it does not replay: that would be a defect here)."""
    schedule = repair.schedule("construct")
    timeline = simulate(graph, schedule)
    if timeline.valid:
        return Construction(schedule, timeline, "", time.monotonic() - started)
    why = f"a constructed schedule does not replay: {timeline.violation}"
    return Construction(None, None, why, time.monotonic() - started)


def schedule_from_keeps(graph: Graph, keeps: Sequence[frozenset[int]], method: str) -> Schedule:
    """The one-device schedule whose stage ``t`` starts with ``keeps[t]`` resident (node
    indices, one row more than stages): each stage computes what it needs and nothing more.
    How the searches' walks (:mod:`solver.optimize.fit_search`, ``best_search``) become
    schedules; the caller replays it."""
    return Repair.from_keeps(graph, [0] * graph.n, keeps).schedule(method)


def _mended(
    graph: Graph, stuck: list[Repair], deadline: float | None, cancel: Cancel | None
) -> Repair | None:
    """The stuck repair of a one-device graph that overflowed least, mended by
    :func:`join_search.mend` within :data:`MEND_SECONDS`, or ``None``."""
    if not stuck:
        return None
    least = min(stuck, key=lambda repair: int(repair.over.sum()))
    placement = [0] * graph.n

    def overflowing(keeps: list[frozenset[int]]) -> list[int]:
        return np.flatnonzero(Repair.from_keeps(graph, placement, keeps).over).tolist()

    until = time.monotonic() + MEND_SECONDS
    keeps = [frozenset(np.flatnonzero(row).tolist()) for row in least.keep]
    mended = mend(
        graph, keeps, overflowing, until if deadline is None else min(until, deadline), cancel
    )
    return None if mended is None else Repair.from_keeps(graph, placement, mended)


def _infeasible(graph: Graph, searched: FitSearch, started: float) -> Construction:
    """The construction's answer when the backward search proved that nothing fits."""
    device = graph.devices[0]
    plural = "" if searched.states == 1 else "s"
    why = (
        f"no schedule fits {format_size(device.activation_budget)} on {device.name}: a "
        "search of every order of computation and recomputation found none (it ran out "
        f"after {searched.states:,} state{plural}, {searched.seconds:.1f} s); give it more memory"
    )
    return Construction(None, None, why, time.monotonic() - started, infeasible=True)


def _repaired(
    graph: Graph,
    placement: Sequence[int],
    deadline: float | None,
    spill: bool = False,
    cancel: Cancel | None = None,
    stuck_ones: list[Repair] | None = None,
) -> Repair | None:
    """The first greed whose repair ends without overflow, or ``None`` (then each greed's
    stuck repair is added to ``stuck_ones``, when given).

    With ``spill``, a repair stuck at a stage moves that stage's biggest operation on the
    overflowing device to the next cheapest device that can hold it, and starts again (at
    most :data:`SPILLS` times): a placement chosen node by node cannot see that a backward
    node and the segment it recomputes do not fit one device together.
    """
    place = list(placement)
    for _ in range(SPILLS + 1 if spill else 1):
        stuck = None
        for greed, candidates in GREEDS:
            if stopped(deadline, cancel):
                return None
            repair = Repair(graph, place, greed, candidates)
            if repair.run(deadline, cancel):
                return repair
            stuck = stuck or repair
            if stuck_ones is not None:
                stuck_ones.append(repair)
        if not spill or stuck is None or not stuck.spill():
            return None
        place = stuck.place
    return None


def _restarted(
    graph: Graph, placement: Sequence[int], deadline: float | None, cancel: Cancel | None
) -> tuple[Repair | None, int]:
    """A repair of a placement every greed left stuck, restarted with chance in its choices
    (seeded 1, 2, ...: the same graph gets the same schedule) until one ends without
    overflow, ``deadline`` passes or ``cancel`` is set; with the number of restarts.

    The greedy repair goes down one path and a drop that looked best can leave a stage no
    later drop relieves; a random walk over the few best drops gets round that on narrow
    graphs (a 100-node random layered graph at 0.8 of its peak: a schedule after 155
    restarts, 3.6 s, where CBC and CP-SAT found none in 60 s).
    """
    for seed in itertools.count(1):
        if stopped(deadline, cancel):
            return None, seed - 1
        repair = Repair(graph, list(placement), "per-ms", GREEDS[-1][1], chance=random.Random(seed))
        if repair.run(deadline, cancel):
            return repair, seed
        if not repair.branched:
            return None, seed  # chance had no choice to make: every seed would end the same
    return None, 0  # pragma: no cover - the loop ends by time or by want of choices
