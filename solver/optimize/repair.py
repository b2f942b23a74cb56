"""The construction's repair: checkpoint-all, then drop what overflows and recompute it.

A schedule here is its keep sets ``K[t]`` (the tensors resident when stage ``t`` starts, each
on its node's device); stage ``t`` then computes node ``t`` and, in ascending order, whatever
it reads or keeps that is not resident (recursively: the least recomputation, as Checkmate
derives ``R`` from ``S``). It starts from checkpoint-all (``K[t]`` holds every tensor still
needed) and repairs: while some stage overflows a device, it *drops* a tensor that the stage
holds without reading it, from the last stage that read it to the next one, which recomputes
it. Each drop is chosen against the whole schedule as it stands (the tensors resident when
the recomputation runs are known, not guessed): the one that removes the most overflow per
millisecond of recomputation, among those that do not make the total overflow worse. A node
computed once (``Node.recomputable`` False) is never dropped, and a drop whose recomputation
would reach one is refused (docs/spec-notes.md, "Nodes computed once").

:mod:`solver.optimize.construct` runs it over placements, greeds and restarts and replays the
cheapest result; this module is the repair itself: its keep matrix, the moves it weighs and
the tightening that follows.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
import time
from collections.abc import Iterator, Sequence

import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.optimize.backends._common import Cancel
from solver.optimize.bounds import node_requirement

__all__ = ["Repair", "stopped"]

MAX_SIDEWAYS = 200
"""Moves that only shift overflow off the worst stage, at most (then the repair gives up)."""
REMAKE_CAP = 64
"""Recomputations longer than this many operations are not estimated (taken as endless)."""
RESTART_RATE = 0.7
"""How far down the ranking a restart reaches: the choice is among the best ``1 + X`` drops,
``X`` exponential with this rate (mean 1.4)."""

StageTrial = tuple[list[int], np.ndarray]
"""A stage's operations, in order, and its peak per device (bytes)."""


def stopped(deadline: float | None, cancel: Cancel | None) -> bool:
    """Whether ``deadline`` has passed or ``cancel`` is set (``None``: neither applies)."""
    return (deadline is not None and time.monotonic() > deadline) or (
        cancel is not None and cancel.is_set()
    )


def _one_run(rows: np.ndarray) -> bool:
    """Whether sorted distinct ``rows`` are consecutive."""
    return int(rows[-1]) - int(rows[0]) == len(rows) - 1


class Repair:
    """Checkpoint-all, then drops until no device overflows (see the module docstring).

    The keep sets are a boolean matrix ``keep[t, i]`` (``i`` resident when stage ``t``
    starts; row ``n`` is empty) with the bytes they hold per device, ``held[t, d]``, so that a
    stage's peak costs a walk over its operations only, and a drop's effect on the stages it
    spans is one vectorised update.
    """

    def __init__(
        self,
        graph: Graph,
        placement: list[int],
        greed: str = "per-ms",
        candidates: int = 16,
        chance: random.Random | None = None,
        keep: np.ndarray | None = None,
    ) -> None:
        g = graph
        self.greed = greed
        self.candidates = candidates
        self.chance = chance  # None: the best drop; else one of the best few at random
        self.branched = False  # whether chance ever had more than one drop to pick from
        self.sideways = 0
        n = g.n
        self.g = g
        self.n = n
        self.place = placement
        self.place_arr = np.array(placement, dtype=np.int64)
        self.size = [int(m) for m in g.output_bytes]
        self.size_arr = np.array(self.size, dtype=np.int64)
        self.work = [int(w) for w in g.workspace]
        self.inputs = g.inputs
        self.budget = np.array([int(b) for b in g.activation_budgets], dtype=np.int64)
        self.num_d = len(self.budget)
        self._budget = self.budget.tolist()
        self.cost = [
            0.0 if math.isnan(g.cost[placement[k], k]) else float(g.cost[placement[k], k])
            for k in range(n)
        ]
        self.plain_ms = float(sum(self.cost))
        self._need = self._own_needs()
        self.once = np.zeros(n, dtype=bool)  # computed once: held, never dropped or remade
        self.once[list(g.once)] = True
        if keep is not None:  # keep sets found elsewhere (a search), to tighten
            self.keep = keep.copy()
            self.held = np.zeros((n + 1, self.num_d), dtype=np.int64)
            for d in range(self.num_d):
                on_d = self.place_arr == d
                self.held[:, d] = self.keep[:, on_d].astype(np.int64) @ self.size_arr[on_d]
        else:
            self._checkpoint_all()
        self.ops: list[list[int]] = [self._closure(t) for t in range(n)]
        self.reads: list[list[int]] = [[] for _ in range(n)]  # stages reading i, sorted
        self.makers: list[list[int]] = [[] for _ in range(n)]  # stages computing i, sorted
        for t in range(n):
            for i in self.ops[t]:
                self.makers[i].append(t)
            for i in self._read_by(self.ops[t]):
                self.reads[i].append(t)
        self.peak = np.zeros((n, self.num_d), dtype=np.int64)
        for t in range(n):
            self.peak[t] = self._stage_peak(t, self.ops[t])
        self.over = np.maximum(self.peak - self.budget, 0).sum(axis=1)
        # stage t's (operations, peak) per change to its rows of the keep matrix, tried
        # since those rows last changed: see :meth:`_stage_with`
        self._tried: dict[int, dict[frozenset[tuple[int, int, bool]], StageTrial]] = {}
        self._overflowing: np.ndarray | None = None  # the stages over budget, sorted

    @classmethod
    def from_keeps(
        cls, graph: Graph, placement: list[int], keeps: Sequence[frozenset[int]]
    ) -> Repair:
        """The schedule whose stage ``t`` starts with ``keeps[t]`` resident (one row more
        than stages, the last empty), as a repair that can be tightened."""
        keep = np.zeros((graph.n + 1, graph.n), dtype=bool)
        for t, ids in enumerate(keeps):
            keep[t, sorted(ids)] = True
        return cls(graph, placement, keep=keep)

    def _checkpoint_all(self) -> None:
        """Keep every tensor from its stage to its last use (the repair's start)."""
        n = self.n
        last_use = [max(users, default=-1) for users in self.g.users]
        self.keep = np.zeros((n + 1, n), dtype=bool)
        for i in range(n):
            if last_use[i] > i:
                self.keep[i + 1 : last_use[i] + 1, i] = True
        # the bytes kept per stage and device: each tensor over [i+1, last use], summed as a
        # difference array (a product with the n x n keep matrix took 0.5 s at 5,000 nodes)
        change = np.zeros((n + 2, self.num_d), dtype=np.int64)
        spans = [i for i in range(n) if last_use[i] > i]
        if spans:
            span = np.array(spans, dtype=np.int64)
            ends = np.array([last_use[i] for i in spans], dtype=np.int64)
            np.add.at(change, (span + 1, self.place_arr[span]), self.size_arr[span])
            np.add.at(change, (ends + 1, self.place_arr[span]), -self.size_arr[span])
        self.held = np.cumsum(change, axis=0)[: n + 1]

    # ----- the derived schedule -----------------------------------------------------------
    def _closure(self, t: int) -> list[int]:
        """Stage ``t``'s operations: node ``t`` and what it keeps newly, with every input that
        is not resident, recursively, in ascending order."""
        resident = self.keep[t].tobytes()  # a byte per tensor: indexed at Python's speed
        newly = np.flatnonzero(self.keep[t + 1] & ~self.keep[t]).tolist()
        inputs = self.inputs
        needed = {t, *newly}
        stack = list(needed)
        while stack:
            for i in inputs[stack.pop()]:
                if i not in needed and not resident[i]:
                    needed.add(i)
                    stack.append(i)
        return sorted(needed)

    def _read_by(self, ops: list[int]) -> set[int]:
        read: set[int] = set()
        for k in ops:
            read.update(self.inputs[k])
        return read

    def _stage_peak(self, t: int, ops: list[int]) -> np.ndarray:
        """Per device, the most memory in use during stage ``t`` (model.md §2 rules 4-5).

        The repair walks stages tens of thousands of times (a 1,000-node random graph: 20,000
        walks of 128 operations on average, a third of its time), so the walk is two plain
        loops: backwards, each tensor the stage reads is freed after its last read unless it
        is kept; forwards, each operation's peak is what is live plus its own bytes."""
        kept = self.keep[t + 1].tobytes()  # a byte per tensor: indexed at Python's speed
        inputs, size, place, need = self.inputs, self.size, self.place, self._need
        num_d = self.num_d
        read: set[int] = set()
        freed = [0] * (len(ops) * num_d)  # bytes freed after operation p, per device
        for p in range(len(ops) - 1, -1, -1):
            for i in inputs[ops[p]]:
                if i not in read:
                    read.add(i)
                    if not kept[i]:
                        freed[p * num_d + place[i]] += size[i]
        if num_d == 1:
            live = top = int(self.held[t, 0])
            for p, k in enumerate(ops):
                if live + need[k] > top:
                    top = live + need[k]
                live += size[k] - freed[p]
                if k not in read and not kept[k]:
                    live -= size[k]
            return np.array([top], dtype=np.int64)
        live_on = self.held[t].tolist()
        peak = list(live_on)
        for p, k in enumerate(ops):
            d = place[k]
            if live_on[d] + need[k] > peak[d]:
                peak[d] = live_on[d] + need[k]
            live_on[d] += size[k]
            for e in range(num_d):
                live_on[e] -= freed[p * num_d + e]
            if k not in read and not kept[k]:
                live_on[d] -= size[k]
        return np.array(peak, dtype=np.int64)

    def _own_needs(self) -> list[int]:
        """Per operation, the bytes it needs beyond what is live on its device: its output,
        its workspace and the copies of inputs that live on another device."""
        size, place = self.size, self.place
        return [
            size[k] + self.work[k] + sum(size[i] for i in self.inputs[k] if place[i] != place[k])
            for k in range(self.n)
        ]

    def _overflow(self, peak: np.ndarray) -> np.ndarray:
        return np.maximum(peak - self.budget, 0).sum(axis=-1)

    def _overflow_of(self, peak: np.ndarray) -> int:
        """One stage's overflow (``peak`` per device), in plain Python: it is asked tens of
        thousands of times, and three array operations on two numbers cost more."""
        return sum(max(p - b, 0) for p, b in zip(peak.tolist(), self._budget, strict=True))

    # ----- repairing ----------------------------------------------------------------------
    def run(self, deadline: float | None, cancel: Cancel | None = None) -> bool:
        """Drop tensors until nothing overflows; False if stuck (or out of time)."""
        steps = 0
        while self.n:
            worst = int(np.argmax(self.over))
            if self.over[worst] == 0:
                return True
            steps += 1
            if steps % 8 == 0 and stopped(deadline, cancel):
                return False
            if not self._drop_one(worst):
                return False
        return True

    def _drop_one(self, s: int) -> bool:
        """Apply the best move that relieves stage ``s``; False if none helps.

        A move drops a tensor ``u`` that ``s`` holds without reading, from the stage that made
        or last read it to the next that reads it (which recomputes it); or does that and
        also holds ``u``'s inputs until then, so that the recomputation needs nothing more
        (worth it when they are smaller than ``u``, as a layer's inputs often are).
        """
        read_here = self._read_by(self.ops[s])
        devices = np.flatnonzero(self.peak[s] > self.budget)
        spans: list[tuple[int, int, int, int, int | None]] = []
        entering = np.flatnonzero(self.keep[s] & np.isin(self.place_arr, devices))
        for u in entering.tolist():
            if u in read_here or self.once[u]:
                continue
            reads = self.reads[u]
            j = bisect.bisect_left(reads, s)
            if j == len(reads):
                continue  # kept and never read again: cannot happen (K holds the needed)
            # the drop starts after the last read, or later where the stay up to s began
            # (found only for the candidates ranked far enough: :meth:`_ranked`)
            low, b = max(reads[j - 1] if j > 0 else -1, u), reads[j]
            spans.append((self.size[u] * (b - low), u, low, b, s))
        newly = np.flatnonzero(self.keep[s + 1] & ~self.keep[s] & np.isin(self.place_arr, devices))
        for u in newly.tolist():  # made here and kept: keep it no longer
            if self.once[u]:
                continue
            reads = self.reads[u]
            j = bisect.bisect_right(reads, s)
            if j < len(reads):
                b = reads[j]
                spans.append((self.size[u] * (b - s), u, s, b, None))
        ranked = self._ranked(spans)
        best = None
        helpful: list[tuple[float, tuple]] = []  # with chance: every helpful move, scored
        sideways = None  # no overflow gone in all, but stage s relieved (it moved elsewhere)
        # The most promising first; only if none of them helps, the next ones, and so on.
        while True:
            batch = list(itertools.islice(ranked, self.candidates))
            if not batch:
                break
            for u, a, b in batch:
                for move in self._moves(u, a, b, s):
                    relief, extra, change = self._evaluate(move)
                    if relief == 0 and self.sideways < MAX_SIDEWAYS:
                        local = self.over[s] - self._over_after(s, change)
                        if local > 0 and (sideways is None or local > sideways[0]):
                            sideways = (local, change)
                    if relief <= 0:
                        continue
                    if self.greed == "per-ms":
                        score = relief / (max(extra, 0.0) + 1e-3)
                    else:  # "relief": the most overflow gone, whatever it costs
                        score = relief - 1e-9 * extra
                    if best is None or score > best[0]:
                        best = (score, change)
                    if self.chance is not None:
                        helpful.append((score, change))
            if best is not None:
                break
        if self.chance is not None and helpful:
            self.branched = self.branched or len(helpful) > 1
            helpful.sort(key=lambda item: -item[0])
            reach = 1 + int(self.chance.expovariate(RESTART_RATE))
            best = self.chance.choice(helpful[:reach])
        if best is None and sideways is not None:
            self.sideways += 1
            best = sideways
        if best is None:
            return False
        self._apply(best[1])
        return True

    # ----- tightening -------------------------------------------------------------------
    def tighten(self, deadline: float | None, cancel: Cancel | None = None) -> int:
        """Keep, instead of recomputing, whatever now fits; the number of recomputations
        undone.

        The repair drops one tensor after another, each against the schedule as it stood:
        a later drop often frees the room that made an earlier one necessary. So once nothing
        overflows, each recomputation ``v`` in stage ``t`` is tried the other way round:
        hold ``v`` from where it was last made or kept until ``t``, taken when it overflows
        no stage and costs less (its cascade goes with it). Passes repeat while one gains.
        """
        undone = 0
        gained = True
        while gained and not self.over.any():
            gained = False
            for t in range(self.n):
                if stopped(deadline, cancel):
                    return undone
                for move in list(self._holds(t)):
                    relief, extra, change = self._evaluate(move)
                    if relief == 0 and extra < -1e-9 and not self._overflows(change):
                        self._apply(change)
                        undone += 1
                        gained = True
        return undone

    def _holds(self, t: int) -> Iterator[list[tuple[int, int, int, int]]]:
        """Moves that keep a tensor stage ``t`` recomputes resident from where it was last
        made or kept, so that ``t`` recomputes neither it nor its cascade."""
        newly = self.keep[t + 1] & ~self.keep[t]
        for v in self.ops[t]:
            if v == t or newly[v]:
                continue
            there = self._last_there(v, t)
            if there is not None:
                yield [(v, there + 1, t, +1)]

    def _last_there(self, i: int, end: int) -> int | None:
        """The last stage before ``end`` that holds ``i`` when it starts or computes it
        (``None``: none does)."""
        kept = np.flatnonzero(self.keep[:end, i])
        makers = self.makers[i]
        j = bisect.bisect_left(makers, end) - 1
        last = max(int(kept[-1]) if len(kept) else -1, makers[j] if j >= 0 else -1)
        return None if last < 0 else last

    def _overflows(self, change) -> bool:
        """Whether a stage overflows once ``change`` is applied."""
        _, new, rows, shifted, _ = change
        after = self.over.copy()  # the change's rows are only those whose overflow it alters
        after[rows] = self._overflow(shifted)
        for t, (_, peak) in new.items():
            after[t] = self._overflow_of(peak)
        return bool(after.any())

    def _ranked(
        self, spans: list[tuple[int, int, int, int, int | None]]
    ) -> Iterator[tuple[int, int, int]]:
        """The candidate drops ``(u, a, b)`` by their score, bytes freed x stages over the
        recomputation's cost, best first, computing that cost (a walk over what is not
        resident) and where the drop starts only for the ones that can still come first.

        A span ``(bytes, u, low, b, s)`` starts at ``low`` or later (where ``u``'s stay up to
        stage ``s`` began; ``s`` is None when ``low`` is exact), and a drop's own run is a
        lower bound of its cost, so ``bytes / own run`` bounds its score from above. On a
        5,000-operation graph every stage holds ~1,400 tensors and a repair ranks them
        1,400 times; almost all are never reached.
        """
        bounded = sorted(
            ((held / (self.cost[u] + 1e-3), u, low, b, s) for held, u, low, b, s in spans),
            reverse=True,
        )
        # A max-heap by exact score; ties go to the larger (u, a, b), as a descending sort of
        # (score, u, a, b) orders them.
        scored: list[tuple[float, int, int, int]] = []
        for bound, u, low, b, s in bounded:
            while scored and -scored[0][0] > bound:
                _, u2, a2, b2 = heapq.heappop(scored)
                yield -u2, -a2, -b2
            a = low if s is None else self._drop_start(u, low, s)
            score = self.size[u] * (b - a) / (self._remake_cost(u, b) + 1e-3)
            heapq.heappush(scored, (-score, -u, -a, -b))
        while scored:
            _, u2, a2, b2 = heapq.heappop(scored)
            yield -u2, -a2, -b2

    def _drop_start(self, u: int, low: int, s: int) -> int:
        """Where dropping ``u`` (held at stage ``s``, last read or made at ``low``) starts:
        ``low``, or the stage before the last one before ``s`` that did not hold it.

        That stage is the last before ``s`` to compute ``u`` (a stage computes only what is
        not resident when it starts, and ``u`` is held from the stage after it to ``s``), so
        it is looked up in the sorted list of the stages that compute ``u``: a look down the
        keep matrix's column took a tenth of a 5,107-operation graph's repair."""
        makers = self.makers[u]
        j = bisect.bisect_left(makers, s) - 1
        return makers[j] - 1 if j >= 0 and makers[j] >= low + 2 else low

    def _over_after(self, t: int, change) -> int:
        """Stage ``t``'s overflow once ``change`` is applied."""
        _, new, rows, shifted, _ = change
        if t in new:
            return self._overflow_of(new[t][1])
        where = np.flatnonzero(rows == t)
        return int(self._overflow(shifted[where[0]])) if len(where) else int(self.over[t])

    def _remake_cost(self, u: int, b: int) -> float:
        """What recomputing ``u`` in stage ``b`` would cost with what is resident there: its
        run and, recursively, its inputs that are not (capped: a long cascade is ruled out
        by its cost anyway, and walking it is what makes large graphs slow)."""
        resident = self.keep[b]
        seen = {u}
        stack = [u]
        cost = 0.0
        while stack:
            k = stack.pop()
            cost += self.cost[k]
            if len(seen) > REMAKE_CAP:
                return math.inf
            for i in self.inputs[k]:
                if not resident[i] and i not in seen:
                    seen.add(i)
                    stack.append(i)
        return cost

    def _moves(self, u: int, a: int, b: int, s: int) -> list[list[tuple[int, int, int, int]]]:
        """Ways to relieve stage ``s`` of ``u``: drop it from ``K[a+1..b]`` (stage ``b``
        recomputes it where it is read), or only over the overflowing stretch around ``s``
        (the first stage after it that fits recomputes ``u`` and keeps it until ``b``); each
        also while holding ``u``'s missing inputs until the recomputation.

        A move is a list of ``(tensor, first, last, sign)``: remove (-1) or add (+1) the
        tensor to ``K[first..last]``.
        """
        ends = [b]
        calm = np.flatnonzero(self.over[s + 1 : b] == 0)
        if len(calm):
            ends.append(s + 1 + int(calm[0]))
        moves = []
        for end in ends:
            drop = [(u, a + 1, end, -1)]
            moves.append(drop)
            hold = self._hold_inputs(u, end)
            if hold:
                moves.append(drop + hold)
        return moves

    def _hold_inputs(self, u: int, end: int) -> list[tuple[int, int, int, int]] | None:
        """Keep each input of ``u`` that is not resident at stage ``end`` from where it last
        was until then (``None`` if there is none to hold, or one lives elsewhere)."""
        hold = []
        for i in self.inputs[u]:
            if self.keep[end, i]:
                continue
            there = self._last_there(i, end)
            if there is None or self.place[i] != self.place[u]:
                return None
            hold.append((i, there + 1, end, +1))
        return hold or None

    def _change(self, move: list[tuple[int, int, int, int]]) -> list[tuple[np.ndarray, int, bool]]:
        """Apply ``move`` to the keep matrix in place; the log of what changed, to undo it."""
        undo = []
        for tensor, first, last, sign in move:
            column = self.keep[first : last + 1, tensor]
            flip = np.flatnonzero(column if sign < 0 else ~column) + first
            if len(flip):
                self._flip(flip, tensor, sign > 0)
                undo.append((flip, tensor, sign > 0))
        return undo

    def _undo(self, undo: list[tuple[np.ndarray, int, bool]]) -> None:
        for flip, tensor, added in reversed(undo):
            self._flip(flip, tensor, not added)

    def _flip(self, flip: np.ndarray, tensor: int, add: bool) -> None:
        """Add ``tensor`` to (or remove it from) the keep rows ``flip``, which lack (hold) it.
        Most flips are one run of rows, written as a slice: a column of the keep matrix is
        strided, and an index array costs half as much again there."""
        rows = slice(int(flip[0]), int(flip[-1]) + 1) if _one_run(flip) else flip
        self.keep[rows, tensor] = add
        self.held[rows, self.place[tensor]] += self.size[tensor] if add else -self.size[tensor]

    def _evaluate(self, move: list[tuple[int, int, int, int]]):
        """(overflow removed, cost added, the change to apply) of a move."""
        undo = self._change(move)
        touched = self._touched(undo)
        try:
            new = {}
            for t in touched:
                new[t] = self._stage_with(t, undo)
        finally:
            self._undo(undo)
        if self.once.any() and any(self._remakes_once(t, ops) for t, (ops, _) in new.items()):
            return -1, math.inf, (move, new, np.zeros(0, dtype=np.int64), self.peak[:0], set())
        # elsewhere the tensor is resident all through and unread: its bytes come or go
        rows, shifted = self._shifting(undo, touched)
        relief = int(self.over[rows].sum() - self._overflow(shifted).sum())
        extra = 0.0
        for t, (ops, peak) in new.items():
            relief += int(self.over[t]) - self._overflow_of(peak)
            extra += sum(map(self.cost.__getitem__, ops)) - sum(
                map(self.cost.__getitem__, self.ops[t])
            )
        return relief, extra, (move, new, rows, shifted, touched)

    def _shifting(
        self, undo: list[tuple[np.ndarray, int, bool]], touched: set[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The stages not walked again whose overflow a change can alter, with their peaks
        after it (the bytes of every flipped tensor added or taken away).

        Only those: a stage that overflows now, or that the bytes a change adds on a device
        could push over its budget. Elsewhere the overflow is zero before and after (bytes
        taken away cannot create it). A drop's rows span thousands of stages on a 5,107-
        operation graph, and shifting all their peaks for every move tried took 30 % of the
        repair's time (sampled); now :meth:`_apply` shifts them, once per move taken, and
        the repair takes 0.81 x the time there.
        """
        if self._overflowing is None:
            self._overflowing = np.flatnonzero(self.over)
        adds = [0] * self.num_d
        for _, tensor, added in undo:
            if added:
                adds[self.place[tensor]] += self.size[tensor]
        pieces = []
        for flip, tensor, added in undo:
            if added:  # bytes on d: the stages they push over its budget (or further)
                d = self.place[tensor]
                pieces.append(flip[self.peak[flip, d] > self.budget[d] - adds[d]])
            else:  # bytes taken away: the stages over a budget now
                over = self._overflowing
                within = over[over.searchsorted(flip[0]) : over.searchsorted(flip[-1], "right")]
                if len(within) and not _one_run(flip):
                    within = within[np.isin(within, flip, assume_unique=True)]
                pieces.append(within)
        if len(pieces) == 1:
            rows = pieces[0]  # sorted and distinct, like the flip it comes from
        else:
            rows = np.unique(np.concatenate(pieces)) if pieces else np.zeros(0, dtype=np.int64)
        if len(rows):
            for t in touched:  # walked again instead
                j = int(rows.searchsorted(t))
                if j < len(rows) and rows[j] == t:
                    rows = np.delete(rows, j)
        shifted = self.peak[rows]  # a copy: fancy indexing
        if len(undo) == 1 and len(rows):  # every row is the flip's
            _, tensor, added = undo[0]
            shifted[:, self.place[tensor]] += self.size[tensor] if added else -self.size[tensor]
        elif len(rows):
            for flip, tensor, added in undo:
                if _one_run(flip):
                    hit = (rows >= flip[0]) & (rows <= flip[-1])
                else:
                    hit = np.isin(rows, flip, assume_unique=True)
                change = self.size[tensor] if added else -self.size[tensor]
                shifted[hit, self.place[tensor]] += change
        return rows, shifted

    def _touched(self, undo: list[tuple[np.ndarray, int, bool]]) -> set[int]:
        """The stages whose operations or peak a change (its log of flips) may alter.

        A stage whose keep rows both gain (or both lose) a tensor it neither reads nor makes
        only holds its bytes for longer (or shorter); every other stage with a flipped row must
        be walked again. That is where a run of flipped rows begins and ends, and not always
        where the move said it would: a drop from just after ``u`` was last read may find
        ``u`` already absent from the first rows (a later stage made it again), and then the
        stage that makes it is the one that changes.
        """
        touched: set[int] = set()
        for flip, tensor, _ in undo:
            first, last = int(flip[0]), int(flip[-1])
            if _one_run(flip):  # as most are
                inside = np.arange(first, last)
            else:
                apart = np.diff(flip) != 1  # where one run ends and the next begins
                touched.update((flip[1:][apart] - 1).tolist())
                touched.update(flip[:-1][apart].tolist())
                inside = flip[:-1][~apart]
            touched.update((first - 1, last))
            if not len(inside):
                continue
            # stages whose two rows both flip are walked again only if they make or read it
            for stages in (self.makers[tensor], self.reads[tensor]):
                lo = bisect.bisect_left(stages, int(inside[0]))
                hi = bisect.bisect_right(stages, int(inside[-1]))
                if lo < hi:
                    these = np.array(stages[lo:hi], dtype=np.int64)
                    touched.update(these[np.isin(these, inside)].tolist())
        touched.discard(-1)
        touched.discard(self.n)
        return touched

    def _stage_with(self, t: int, undo: list[tuple[np.ndarray, int, bool]]) -> StageTrial:
        """Stage ``t``'s operations and peak with the trial change ``undo`` applied.

        They depend on the keep rows ``t`` and ``t + 1`` alone, and a greedy step tries
        again most of the moves the step before it tried and did not take (on a 1,000-node
        random graph at 0.8, 63 % of the stages looked up had been, and the repair took 0.78
        x the time). So they are kept per change to those two rows until one of them changes
        for good (:meth:`_apply`).
        """
        change = []
        for flip, tensor, added in undo:
            for row in (t, t + 1):
                j = int(flip.searchsorted(row))
                if j < len(flip) and flip[j] == row:
                    change.append((tensor, row - t, added))
        key = frozenset(change)
        tried = self._tried.setdefault(t, {})
        found = tried.get(key)
        if found is None:
            ops = self._closure(t)
            found = tried[key] = (ops, self._stage_peak(t, ops))
        return found

    def _remakes_once(self, t: int, ops: list[int]) -> bool:
        """Whether stage ``t`` would compute again a node computed once (a move whose cascade
        reaches one is refused: hold its inputs instead, another move)."""
        return any(self.once[k] and k != t for k in ops)

    def _apply(self, change) -> None:
        move, new, _, _, touched = change
        undo = self._change(move)
        if self._tried:  # stages row - 1 and row of a flipped row are walked anew
            remembered = np.fromiter(self._tried, dtype=np.int64, count=len(self._tried))
            stale = np.zeros(len(remembered), dtype=bool)
            for flip, _, _ in undo:  # a flip spans thousands of rows on a large graph
                stale |= np.isin(remembered, flip) | np.isin(remembered + 1, flip)
            for t in remembered[stale].tolist():
                del self._tried[t]
        # every stage not walked again that holds a flipped tensor all through shifts
        mask = np.zeros(self.n + 1, dtype=bool)
        delta = np.zeros((self.n + 1, self.num_d), dtype=np.int64)
        for flip, tensor, added in undo:  # a flip's stages are distinct: += adds once each
            mask[flip] = True
            delta[flip, self.place[tensor]] += self.size[tensor] if added else -self.size[tensor]
        mask[list(touched)] = False
        rows = np.flatnonzero(mask)
        self.peak[rows] += delta[rows]
        self.over[rows] = self._overflow(self.peak[rows])
        self._overflowing = None
        for t, (ops, peak) in new.items():
            old_reads = self._read_by(self.ops[t])
            new_reads = self._read_by(ops)
            for i in old_reads - new_reads:
                self.reads[i].remove(t)
            for i in new_reads - old_reads:
                bisect.insort(self.reads[i], t)
            old_ops, new_ops = set(self.ops[t]), set(ops)
            for i in old_ops - new_ops:
                self.makers[i].remove(t)
            for i in new_ops - old_ops:
                bisect.insort(self.makers[i], t)
            self.ops[t] = ops
            self.peak[t] = peak
            self.over[t] = self._overflow_of(peak)

    def spill(self) -> bool:
        """Move the biggest operation of the worst stage, on the device that overflows
        there, to its next cheapest device that can hold it; False if there is none."""
        g = self.g
        s = int(np.argmax(self.over))
        d = int(np.argmax(self.peak[s] - self.budget))
        mine = sorted((k for k in self.ops[s] if self.place[k] == d), key=lambda k: -self.size[k])
        for k in mine:
            need = node_requirement(g, k)
            others = [
                (float(g.cost[e, k]), e)
                for e, device in enumerate(g.devices)
                if e != d and not math.isnan(g.cost[e, k]) and need <= device.activation_budget
            ]
            if others:
                self.place = list(self.place)
                self.place[k] = min(others)[1]
                self._need = self._own_needs()
                return True
        return False

    def predicted_ms(self) -> float:
        """The serial cost of the repaired schedule (what the simulator will say if valid):
        every operation's compute time and its inputs' copies from other devices."""
        g = self.g
        total = 0.0
        for ops in self.ops:
            for k in ops:
                total += self.cost[k]
                for i in self.inputs[k]:
                    src, dst = self.place[i], self.place[k]
                    if src != dst:
                        total += g.edge_transfer_ms(g.edge_number[i, k], src, dst)
        return total

    def schedule(self, method: str) -> Schedule:
        g = self.g
        ids = np.array([node.id for node in g.nodes], dtype=object)
        names = [device.name for device in g.devices]
        stages = []
        for t in range(self.n):
            operations = tuple(self._operation(k) for k in self.ops[t])
            kept = np.flatnonzero(self.keep[t + 1])
            keep: dict[str, frozenset[str]] = {}
            for d, name in enumerate(names):
                mine = kept[self.place_arr[kept] == d] if self.num_d > 1 else kept
                if len(mine):
                    keep[name] = frozenset(ids[mine].tolist())
            stages.append(Stage(operations, keep))
        return Schedule(g.name, g.memory_limits, tuple(stages), SolverInfo(method=method))

    def _operation(self, k: int) -> Operation:
        g, d = self.g, self.place[k]
        remote = {
            g.nodes[i].id: g.devices[self.place[i]].name
            for i in self.inputs[k]
            if self.place[i] != d
        }
        return Operation(g.nodes[k].id, g.devices[d].name, remote)
