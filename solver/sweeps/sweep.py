"""Budget sweeps: the memory/time trade-off curve of one device, solved in parallel and stored.

Each point solves a graph with one device's budget set to a fraction of the no-rematerialization
peak (docs/formats.md ``sweep``). A sweep is a list of independent :class:`SweepTask` s (graphs x
budgets x methods). :func:`run_sweep` answers what it can from the result store at once, then
solves the rest one after another (``jobs=1``), in a pool of worker processes (``jobs>1``), or on
a Dask cluster (``scheduler``, :mod:`solver.sweeps.cluster`). Points are handed to ``on_point``
as they finish, in any order; the returned list is in task order. Setting ``cancel`` stops
every running solve (each keeps its incumbent) and drops the tasks not started; every point
that finished is returned, and was stored by the process that solved it.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass

from solver.document.graph import Graph
from solver.optimize.bounds import no_remat_peak
from solver.optimize.methods import offload_applies, solve
from solver.optimize.solve import SolveOptions, SolveResult
from solver.results.cached import stored_answer
from solver.results.store import ResultStore, StoredResult
from solver.status import SolveStatus

__all__ = [
    "SweepPoint",
    "SweepTask",
    "budget_steps",
    "sweep_tasks",
    "sweep_budgets",
    "run_task",
    "run_sweep",
    "default_jobs",
]

logger = logging.getLogger(__name__)

POLL_S = 0.1
"""How often the parent looks at the cancel Event while waiting for workers."""


@dataclass(frozen=True)
class SweepPoint:
    """One solve of the sweep: ``activation_budget`` bytes for activations on ``device``.

    ``graph`` names the network (the CLI's argument); ``from_store`` is true when the result
    store answered without solving; ``offload`` when the solve could offload (``--offload``
    and a method it applies to, :func:`~solver.optimize.methods.offload_applies`).
    """

    device: str
    fraction: float
    activation_budget: int
    method: str
    result: SolveResult
    graph: str = ""
    from_store: bool = False
    offload: bool = False

    @property
    def total_ms(self) -> float | None:
        timeline = self.result.timeline
        return timeline.total_ms if self.result.ok and timeline is not None else None


@dataclass(frozen=True)
class SweepTask:
    """One solve to do: ``graph`` already carries the memory limit; picklable for workers."""

    index: int
    graph: Graph
    label: str
    device: str
    fraction: float
    activation_budget: int
    method: str
    options: SolveOptions

    def point(self, result: SolveResult, from_store: bool = False) -> SweepPoint:
        """The sweep point of this task with ``result``."""
        offload = self.options.offload and offload_applies(self.method)
        return SweepPoint(
            self.device,
            self.fraction,
            self.activation_budget,
            self.method,
            result,
            self.label,
            from_store,
            offload,
        )


def budget_steps(start: float, stop: float, steps: int) -> list[float]:
    """Evenly spaced fractions from ``start`` to ``stop`` inclusive.

    Examples
    --------
    >>> budget_steps(1.0, 0.1, 4)
    [1.0, 0.7, 0.4, 0.1]
    """
    if steps < 2:
        return [start]
    return [round(start + (stop - start) * j / (steps - 1), 6) for j in range(steps)]


def default_jobs(options: SolveOptions) -> int:
    """Worker processes for a sweep: the cores divided by the cores each solve keeps busy.

    A solve keeps its backend's threads busy, and as many again while a neighbourhood search
    runs beside the full model (``SolveOptions.improve``, where the solver has it).
    """
    per_solve = max(1, options.threads or 1) * (2 if getattr(options, "improve", False) else 1)
    return max(1, (os.cpu_count() or 1) // per_solve)


def sweep_tasks(
    graph: Graph,
    device: str,
    fractions: Iterable[float],
    methods: Iterable[str],
    options: SolveOptions,
    label: str = "",
    first_index: int = 0,
) -> list[SweepTask]:
    """The tasks of one graph: ``device``'s memory is its fixed memory plus each fraction of
    the no-remat peak, solved with each method.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> tasks = sweep_tasks(unit_chain(2), "cpu", [1.0, 0.5], ["checkpoint-all"], SolveOptions())
    >>> [(t.index, t.activation_budget, t.graph.device("cpu").memory_limit) for t in tasks]
    [(0, 4, 4), (1, 2, 2)]
    """
    peak = no_remat_peak(graph)
    fixed = graph.device(device).fixed_memory
    methods = list(methods)
    tasks: list[SweepTask] = []
    for fraction in fractions:
        budget = int(fraction * peak)
        variant = graph.with_memory_limits({device: fixed + budget})
        for method in methods:
            index = first_index + len(tasks)
            tasks.append(
                SweepTask(index, variant, label, device, fraction, budget, method, options)
            )
    return tasks


def run_task(
    task: SweepTask,
    store_path: str | os.PathLike | None = None,
    report: Callable[[object], None] | None = None,
    cancel: threading.Event | None = None,
) -> SweepPoint:
    """Solve one task and store its result (the unit of work of every worker).

    ``report`` is accepted so that ``partial(run_task, task, path)`` is a GUI process job; it
    gets nothing. The result is stored before it is returned, so a sweep killed later keeps it.
    """
    try:
        result = solve(task.graph, task.method, task.options, cancel=cancel)
    except Exception as exc:  # one bad point must not sink the sweep
        logger.exception("sweep point %s failed", task.index)
        result = SolveResult(task.method, SolveStatus.ERROR, message=f"{type(exc).__name__}: {exc}")
    if store_path is not None:
        ResultStore(store_path).put(task.graph, task.method, task.options, result)
    return task.point(result)


def run_sweep(
    tasks: Sequence[SweepTask],
    jobs: int = 1,
    store: ResultStore | None = None,
    on_point: Callable[[SweepPoint], None] | None = None,
    cancel: threading.Event | None = None,
    on_stored: Callable[[SweepTask, StoredResult], None] | None = None,
    scheduler: str | None = None,
) -> list[SweepPoint]:
    """Run ``tasks`` (see the module docstring); the finished points in task order.

    ``on_stored`` is told of a stored result that fell short of the asked time limit (it is
    solved again). ``scheduler`` is a Dask scheduler address (``tcp://HOST:PORT``).
    """
    points: dict[int, SweepPoint] = {}

    def arrived(point: SweepPoint, index: int) -> None:
        points[index] = point
        if on_point is not None:
            on_point(point)

    todo = []
    for task in tasks:
        stored, final = stored_answer(task.graph, task.method, task.options, store)
        if stored is not None and final:
            arrived(task.point(stored.result, from_store=True), task.index)
            continue
        if stored is not None and on_stored is not None:
            on_stored(task, stored)
        todo.append(task)
    if todo and not (cancel is not None and cancel.is_set()):
        store_path = str(store.path) if store is not None else None
        if scheduler is not None:
            from solver.sweeps.cluster import run_on_dask  # dask is optional: imported here only

            run_on_dask(todo, scheduler, store, arrived, cancel)
        elif jobs > 1 and len(todo) > 1 and not multiprocessing.current_process().daemon:
            _run_in_pool(todo, min(jobs, len(todo)), store_path, arrived, cancel)
        else:
            for task in todo:
                if cancel is not None and cancel.is_set():
                    break
                arrived(run_task(task, store_path, cancel=cancel), task.index)
    return [points[i] for i in sorted(points)]


def sweep_budgets(
    graph: Graph,
    device: str,
    fractions: Iterable[float],
    methods: Iterable[str] = ("xengine", "checkmate"),
    options: SolveOptions = SolveOptions(),
    executor: Executor | None = None,
    on_point: Callable[[SweepPoint], None] | None = None,
    cancel: threading.Event | None = None,
) -> list[SweepPoint]:
    """Solve ``graph`` for each budget fraction of ``device`` and each method (no store).

    With an ``executor`` the solves run concurrently on it; ``on_point`` is called as each one
    finishes. Points cancelled before they start are left out.
    """
    tasks = sweep_tasks(graph, device, fractions, methods, options)
    if executor is None:
        return run_sweep(tasks, on_point=on_point, cancel=cancel)

    def run(task: SweepTask) -> SweepPoint | None:
        if cancel is not None and cancel.is_set():
            return None
        point = run_task(task, cancel=cancel)
        if on_point is not None:
            on_point(point)
        return point

    futures: list[Future] = [executor.submit(run, task) for task in tasks]
    return [p for p in (f.result() for f in futures) if p is not None]


# ----- the local pool ---------------------------------------------------------------------------
_STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals that stop a sweep. A terminal hang-up, ``kill -TERM -PGID`` or a service manager
sends them to the whole process group, workers included."""


class _WorkerStop:
    """What a worker's solve watches: the sweep-wide cancel Event, or a signal to this worker.

    A worker that dies of SIGTERM or SIGHUP (their default action) loses the solve it is
    running and leaves its CBC behind until CBC's own time limit; so a worker catches them
    (and SIGINT) and stops its solve the way a cancel does, keeping the incumbent. A second
    signal during the same task means it: the worker then dies as it would have.
    """

    def __init__(self, shared=None) -> None:
        self.shared = shared
        self.signalled = False

    def is_set(self) -> bool:
        return self.signalled or (self.shared is not None and self.shared.is_set())

    def on_signal(self, signum: int, frame: object) -> None:
        if self.signalled:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signalled = True


_worker_stop = _WorkerStop()
_worker_store: str | None = None


def _init_worker(cancel, store_path: str | None) -> None:
    """Pool worker start: stop signals stop this worker's solve (see :class:`_WorkerStop`).

    The parent started the pool with those signals blocked, so none is lost or acted on by
    the default handler before these handlers are in place; they are unblocked here.
    """
    global _worker_stop, _worker_store
    _worker_stop, _worker_store = _WorkerStop(cancel), store_path
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _worker_stop.on_signal)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _pool_task(task: SweepTask) -> SweepPoint | None:
    _worker_stop.signalled = False  # a signal between two tasks: the parent cancels if it was
    if _worker_stop.shared is not None and _worker_stop.shared.is_set():
        return None  # queued before the cancel: never started, nothing to report
    # _WorkerStop has the one method a solve calls on its cancel Event, is_set()
    return run_task(task, _worker_store, cancel=_worker_stop)  # type: ignore[arg-type]


def _pool_context() -> multiprocessing.context.BaseContext:
    """``fork`` where it is safe and fast (Linux, a caller with no other Python thread: the
    workers start in milliseconds with every module already imported), else ``forkserver``
    with the solver preloaded (its first start costs the imports, about 0.4 s), else
    ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["solver.optimize.methods", "solver.sweeps.sweep"])
        return context
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Block the stop signals while the pool's processes start: the workers (and a forkserver
    or resource tracker started now) inherit the mask, so a group signal can neither kill
    them before they handle it nor be lost; the parent gets a pending one when unblocked."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _hardest_first(tasks: list[SweepTask]) -> list[SweepTask]:
    """Longest-expected first, so that a long solve does not start last while the other
    workers idle (the sweep's wall time is at least its longest solve plus what precedes it).

    The expectation is a guess, in this order: a method that solves a model before a
    heuristic; a bigger model first (nodes squared times devices, the size of XEngine's
    model); a budget below the no-remat peak (something must be recomputed or moved) before
    one at or above it; then task order.
    """

    def work(task: SweepTask) -> tuple:
        model = task.method.split(":", 1)[0] in ("xengine", "checkmate", "overlap")
        size = task.graph.n**2 * len(task.graph.devices)
        return (not model, -size, task.fraction >= 1.0, task.index)

    return sorted(tasks, key=work)


def _run_in_pool(
    tasks: list[SweepTask],
    jobs: int,
    store_path: str | None,
    arrived: Callable[[SweepPoint, int], None],
    cancel: threading.Event | None,
) -> None:
    context = _pool_context()
    with _signals_blocked():
        stop = context.Event()
        pool = ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_init_worker, initargs=(stop, store_path)
        )
        try:
            running = {pool.submit(_pool_task, task): task for task in _hardest_first(tasks)}
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    with pool:
        while running:
            if cancel is not None and cancel.is_set() and not stop.is_set():
                stop.set()  # running solves stop and keep their incumbents
                for future in running:
                    future.cancel()
            done, _ = wait(running, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                task = running.pop(future)
                if future.cancelled():
                    continue
                try:
                    point = future.result()
                except Exception as exc:  # noqa: BLE001 - a dead worker: say so on its point
                    message = f"the worker process failed: {type(exc).__name__}: {exc}"
                    point = task.point(SolveResult(task.method, SolveStatus.ERROR, message=message))
                if point is not None:
                    arrived(point, task.index)
