"""Benchmark the schedule views: time to draw a 5,000-operation schedule and to pan it.

Builds a synthetic CPU+GPU schedule (a chain whose every stage recomputes the previous node and
computes the next, switching devices in blocks so that transfers appear), replays it, and times
each view offscreen: the first draw, a redraw with a new result, one pan step over the whole
schedule, one pan step zoomed in to 2 % (where bar labels appear), and a hover (hit-test plus
the tooltip, whose recomputation reason replays the schedule up to that bar) and one step of
the step-through cursor. Views: the Gantt chart, memory curves, the Schedule tab (both with
the overview strip), the R/S matrices, memory per tensor, the graph (5,000 nodes, coloured by
residency at each step) and the step-through panel; the comparison and the explorer plot a
point per method or budget, never per operation. Every timing but the hover includes a real
paint (``QWidget.grab``). A first draw is the median of up to three new views, each opened
after the view has drawn a small schedule once, as the window's views have when a user opens
a big graph (a fresh process pays fonts and pyqtgraph's first plot on its first view only).
Prints a table.

    .venv/bin/python bench/draw.py [--ops 5000] [--repeat 10] [--cpu]

``--stall EXAMPLE`` instead opens the window on a bundled example with the GPU at
``--gpu-percent`` of its no-remat peak, solves it (``--solver``, ``--limit``) and reports the
event loop's longest gaps from the Solve click until the result is drawn (a 10 ms timer). Each
gap says how much CPU the GUI thread used in it and how long it was ready to run but waited for
a CPU (``/proc/thread-self/schedstat``), which tells the window's own work apart from a busy
machine, and lists what ran in it: the outermost events, the views' slots and every widget's
paint, with their CPU. ``--runs N`` repeats the solve N times, each in a fresh process (a first
incumbent costs more in a fresh window), and tabulates the longest gap of each run:

    .venv/bin/python bench/draw.py --stall vgg16 --solver cbc --limit 20 --runs 10

``--stream SECONDS`` plays a solve in the real window that streams a 5,000-operation (``--ops``)
incumbent ``--rate`` times a second, and reports the event loop's longest gaps: the window's
own cost of drawing one big incumbent after another (no solver competes for the CPUs);
``--trace`` also lists what ran in the longest gaps (events, the views' slots, paints).

The graph view's table times its layout (module folding, layering, wrapping), its first draw
(the layout included) and pan and zoom frames on a 5,000-node chain and a 5,000-op graph named
by module path.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QApplication, QWidget

from app.document import Document
from app.theme import apply_theme
from app.views.gantt import GanttView
from app.views.graph_view import GraphView
from app.views.matrices import MatricesView
from app.views.memory import MemoryView
from app.views.schedule_view import ScheduleView
from app.views.stepper import StepperPanel
from app.views.tensors import TensorMemoryView
from solver.document.graph import Device, Edge, Graph, Link, Node, make_graph
from solver.document.schedule import Operation, Schedule, Stage
from solver.execution.simulate import simulate
from solver.optimize.solve import SolveResult
from solver.status import SolveStatus

MB = 10**6


def synthetic_graph(stages: int) -> Graph:
    """A chain ``x0 -> x1 -> ...``; the first half forward, a loss, the rest backward."""
    devices = [Device("cpu", "cpu", 64 * MB), Device("gpu", "gpu", 16 * MB)]
    links = [Link("cpu", "gpu", 12e9, 0.01), Link("gpu", "cpu", 12e9, 0.01)]
    half = stages // 2
    kinds = ["forward"] * half + ["loss"] + ["backward"] * (stages - half - 1)
    nodes = [
        Node(f"x{i}", MB, {"cpu": 1.0 + (i % 7) * 0.3, "gpu": 0.2 + (i % 5) * 0.05}, kinds[i])
        for i in range(stages)
    ]
    edges = [Edge(f"x{i}", f"x{i + 1}") for i in range(stages - 1)]
    return make_graph(f"synthetic chain ({stages} stages)", devices, nodes, edges, links)


def synthetic_schedule(graph: Graph) -> Schedule:
    """Stage t recomputes x(t-1) from the kept x(t-2), then computes x(t); blocks of 12 stages
    run on the CPU every 60 stages, so inputs cross the link at each switch."""

    def device(t: int) -> str:
        return "cpu" if t % 60 >= 48 else "gpu"

    stages = [Stage((Operation("x0", device(0)),), {device(0): frozenset({"x0"})})]
    stages.append(
        Stage(
            (Operation("x1", device(1), {"x0": device(0)}),),
            {device(0): frozenset({"x0"})},
        )
    )
    kept_on = device(0)  # where x(t-2) is kept at the start of stage t
    for t in range(2, graph.n):
        d = device(t)
        ops = (
            Operation(f"x{t - 1}", d, {f"x{t - 2}": kept_on}),
            Operation(f"x{t}", d),
        )
        stages.append(Stage(ops, {d: frozenset({f"x{t - 1}"})}))
        kept_on = d
    return Schedule(graph.name, {}, tuple(stages))


def synthetic_modular_graph(ops: int) -> Graph:
    """A training graph of about ``ops`` operations named by module path, as the ATen
    importer names a deep residual network: stages of blocks of 6 operations with a residual
    sum, each forward operation with its backward one (which reads its input)."""
    devices = [Device("cpu", "cpu", 64 * MB), Device("gpu", "gpu", 16 * MB)]
    links = [Link("cpu", "gpu", 12e9, 0.01), Link("gpu", "cpu", 12e9, 0.01)]
    per_block = 7  # 6 ops and the residual sum
    blocks = max(1, (ops // 2 - 2) // per_block)
    stages = 4
    nodes: list[Node] = []
    edges: list[Edge] = []

    def add(name: str, module: str, inputs: list[str], shape: list[int]) -> str:
        extra = {"module": module, "shape": shape}
        cost = {"cpu": 1.0, "gpu": 0.1}
        nodes.append(Node(name, MB, cost, "forward", "convolution", None, 1e9, None, extra))
        edges.extend(Edge(i, name) for i in inputs)
        return name

    last = add("stem.convolution", "stem", [], [8, 64, 56, 56])
    for b in range(blocks):
        stage, block = b * stages // blocks, b
        module = f"layer{stage + 1}.{block}"
        entry = last
        for k in range(6):
            last = add(f"{module}.conv{k}.op_{b}_{k}", f"{module}.conv{k}", [last], [8, 64, 56, 56])
        last = add(f"{module}.add_{b}", module, [last, entry], [8, 64, 56, 56])
    nodes.append(Node("loss", 1000, {"cpu": 0.1, "gpu": 0.1}, "loss"))
    edges.append(Edge(last, "loss"))
    forward = [n for n in nodes if n.kind == "forward"]
    previous = "loss"
    for node in reversed(forward):
        grad = f"{node.id}.grad"
        nodes.append(Node(grad, MB, {"cpu": 2.0, "gpu": 0.2}, "backward", "grad", node.id))
        edges.append(Edge(previous, grad))
        edges.extend(Edge(e.source, grad) for e in edges[:] if e.target == node.id)
        previous = grad
    return make_graph(f"synthetic modular net ({len(nodes)} ops)", devices, nodes, edges, links)


def bench_graph_layout(graph: Graph, folded: bool, repeat: int) -> list:
    """The graph view on ``graph``: the layout alone (module folding, layering, wrapping),
    the first draw, and a pan and a zoom frame at Fit and zoomed in."""
    from app.views.graph_hierarchy import fold, hierarchy, initial_expansion
    from app.views.graph_layout import layout_graph, scene_positions, wrap_count
    from app.views.graph_view import SPACING

    def layout() -> int:
        h = hierarchy(graph)
        shown = fold(graph, initial_expansion(graph, h), h).graph if folded else graph
        placement = layout_graph(shown)
        lines = wrap_count(placement, SPACING, 1600 / 900)
        scene_positions(placement, SPACING, lines)
        return shown.n

    boxes = layout()
    layout_ms = timed(layout, repeat)

    def open_graph() -> tuple[GraphView, float]:
        document = Document()
        started = CLOCK[0]()
        document.set_graph(graph)
        view = GraphView(document)
        view.resize(1600, 900)
        view.show()
        view.grab()
        first = (CLOCK[0]() - started) * 1000  # as a user opens it (big ones folded)
        if view.collapse_action.isChecked() != folded:
            started = CLOCK[0]()
            view.collapse_action.setChecked(folded)  # the toolbar's Fold modules
            view.grab()
            first = (CLOCK[0]() - started) * 1000
        return view, first

    firsts = []
    for _ in range(max(1, min(3, repeat)) - 1):
        view, ms = open_graph()
        view.close()
        firsts.append(ms)
    view, ms = open_graph()
    first = statistics.median([*firsts, ms])
    canvas = view.canvas
    canvas.fit()
    steps = iter(range(1, 10**6))
    bounds = view.scene.content_bounds

    def pan() -> None:
        k = next(steps)
        canvas.centerOn(bounds.center() + QPointF((k % 7 - 3) * 0.02 * bounds.width(), 0))
        canvas.viewport().grab()

    def zoom() -> None:
        canvas.zoom(1.1 if next(steps) % 2 else 1 / 1.1)
        canvas.viewport().grab()

    fit_pan, fit_zoom = timed(pan, repeat), timed(zoom, repeat)
    canvas.fit()
    canvas.zoom(8.0)  # a few dozen boxes readable
    near_pan, near_zoom = timed(pan, repeat), timed(zoom, repeat)
    view.close()
    return [graph.n, boxes, layout_ms, first, fit_pan, fit_zoom, near_pan, near_zoom]


def make_result(graph: Graph) -> SolveResult:
    schedule = synthetic_schedule(graph)
    timeline = simulate(graph, schedule, strict=True)
    return SolveResult("synthetic", SolveStatus.FEASIBLE, schedule, timeline, timeline.total_ms)


CLOCK: list[Callable[[], float]] = [time.perf_counter]
"""The tables' clock: wall time, or with ``--cpu`` the GUI thread's CPU time (offscreen, all
drawing is that thread's work; on a shared machine its wall time is mostly others' load)."""


def timed(action: Callable[[], object], repeat: int) -> float:
    """Median milliseconds of ``action`` over ``repeat`` runs."""
    samples = []
    for _ in range(repeat):
        started = CLOCK[0]()
        action()
        samples.append((CLOCK[0]() - started) * 1000)
    return statistics.median(samples)


def _middle(op) -> float:
    return (op.start + op.end) / 2


def pan_plot(view: QWidget):
    """The plot whose x range pans the view, if it has one."""
    if isinstance(view, GanttView):
        return view.plot
    if isinstance(view, ScheduleView):
        return view.gantt.plot
    if isinstance(view, (MemoryView, TensorMemoryView)):
        return view.plot("gpu")
    return None


def flush(view: QWidget) -> None:
    """Draw a result the view keeps for an event of its own (GanttView, MemoryView), now."""
    for part in (view, getattr(view, "gantt", None), getattr(view, "memory", None)):
        if hasattr(part, "flush"):
            part.flush()


def open_view(make, graph: Graph, result: SolveResult) -> tuple[QWidget, Document, float]:
    """A new view of ``result`` drawn once, as a user opens it, and its milliseconds."""
    document = Document()
    document.set_graph(graph)
    document.set_result(result)
    started = CLOCK[0]()
    view = make(document)
    view.resize(1600, 900)
    view.show()
    flush(view)
    view.grab()
    return view, document, (CLOCK[0]() - started) * 1000


def warm_up(make) -> None:
    """Draw ``make``'s view once on a small schedule: the window has drawn its views at start
    (fonts, pyqtgraph's first plot), which a fresh process pays on its first view only."""
    small = synthetic_graph(20)
    view, _, _ = open_view(make, small, make_result(small))
    view.close()


def bench_view(name: str, make, graph: Graph, results: list[SolveResult], repeat: int) -> list:
    warm_up(make)
    firsts = []
    for _ in range(max(1, min(3, repeat)) - 1):
        view, _, ms = open_view(make, graph, results[0])
        view.close()
        firsts.append(ms)
    view, document, ms = open_view(make, graph, results[0])
    first = statistics.median([*firsts, ms])
    flip = iter(results * (repeat + 1))
    redraw = timed(lambda: (document.set_result(next(flip)), flush(view), view.grab()), repeat)
    plot = pan_plot(view)
    pan_full = pan_zoomed = hover = float("nan")
    if plot is not None:
        end = document.timeline.total_ms
        steps = iter(range(1, 10**6))

        def pan(width: float) -> None:
            start = (next(steps) * 0.013 * end) % (end - width + 1e-9)
            plot.setXRange(start, start + width, padding=0)
            view.grab()

        pan_full = timed(lambda: pan(end), repeat)
        pan_zoomed = timed(lambda: pan(0.02 * end), repeat)
        gantt = view if isinstance(view, GanttView) else getattr(view, "gantt", None)
        if gantt is not None:
            # a different recomputed bar each time, so no explanation comes from the cache
            ops = [op for op in document.timeline.ops if op.recompute and op.device == "gpu"]
            lane = gantt.lanes.index("gpu")
            spots = iter(ops[len(ops) // 3 :: 7])
            hover = timed(lambda: gantt.tooltip_at(_middle(next(spots)), lane), repeat)
    # one step of the step-through cursor (arrow key): every view follows it
    cursor = iter(range(1, 10**6))
    count = len(document.timeline.ops)
    step = timed(lambda: (document.set_cursor(next(cursor) * 37 % count), view.grab()), repeat)
    document.set_cursor(None)
    view.close()
    return [name, first, redraw, pan_full, pan_zoomed, hover, step]


class _Trace:
    """What the GUI thread ran during a stall measurement: outermost events and view slots.

    Events come from :meth:`TimedApplication.notify` (receiver class, event type; a timer is
    named by its parent's class), slots from wrapping the views' ``_on_*``/``_redraw*``/
    ``_draw*``/``_apply*`` methods. Only spans of at least ``MIN_S`` are kept; each is
    ``(start, end, depth, label, GUI-thread CPU)`` in seconds (``time.perf_counter``).
    """

    MIN_S = 0.002

    def __init__(self) -> None:
        self.spans: list[tuple[float, float, int, str]] = []
        self.depth = 0

    def run(self, label: str, call: Callable[[], object]) -> object:
        started, cpu = time.perf_counter(), time.thread_time()
        self.depth += 1
        try:
            return call()
        finally:
            self.depth -= 1
            ended = time.perf_counter()
            if ended - started >= self.MIN_S:
                self.spans.append((started, ended, self.depth, label, time.thread_time() - cpu))

    def inside(self, lo: float, hi: float) -> list[tuple[float, float, str]]:
        """(ms inside [lo, hi], its CPU ms, label) of the events and slots that ran in that
        window, in the order they started; nested slots are indented."""
        return [
            ((min(e, hi) - max(s, lo)) * 1000, cpu * 1000, f"{'  ' * d}{label}")
            for s, e, d, label, cpu in sorted(self.spans)
            if e > lo and s < hi
        ]


TRACE = _Trace()


def _event_label(receiver, event) -> str:
    from PySide6.QtCore import QTimer

    name = type(receiver).__name__
    if isinstance(receiver, QTimer) and receiver.parent() is not None:
        name = f"QTimer of {type(receiver.parent()).__name__}"
    try:
        kind = event.type().name
    except AttributeError:  # an event type Qt has no name for
        kind = str(int(event.type()))
    return f"{name} {kind}"


def timed_application() -> QApplication:
    """A QApplication whose every outermost event is timed into :data:`TRACE`."""

    class TimedApplication(QApplication):
        def notify(self, receiver, event) -> bool:
            if TRACE.depth:
                return super().notify(receiver, event)
            label = _event_label(receiver, event)
            return TRACE.run(label, lambda: super(TimedApplication, self).notify(receiver, event))

    return TimedApplication([])


def trace_slots() -> None:
    """Wrap the window's slot and drawing methods so that :data:`TRACE` times them."""
    import functools
    import inspect

    from app.main_window import MainWindow
    from app.panels.solver_panel import SolverPanel
    from app.solving import SolveController
    from app.views.comparison import ComparisonView
    from app.views.explorer import ExplorerView

    classes = (
        MainWindow, SolveController, GanttView, MemoryView, ScheduleView, MatricesView,
        TensorMemoryView, GraphView, StepperPanel, ComparisonView, ExplorerView,
    )  # fmt: skip
    prefixes = ("_on_", "_redraw", "_draw", "_apply", "_flush", "_update")

    def wrap(cls: type, name: str, method):
        label = f"{cls.__name__}.{name}"

        @functools.wraps(method)
        def timed(*args, **kwargs):
            return TRACE.run(label, lambda: method(*args, **kwargs))

        return timed

    for cls in classes:
        for name, method in list(vars(cls).items()):
            if name.startswith(prefixes) and inspect.isfunction(method):
                setattr(cls, name, wrap(cls, name, method))

    # paints, named by the view (or panel) holding the widget painted
    import pyqtgraph as pg

    from app.views.graph_canvas import GraphCanvas

    owners = (*classes, SolverPanel)

    def owner(widget) -> str:
        while widget is not None and not isinstance(widget, owners):
            widget = widget.parentWidget()
        return type(widget).__name__ if widget is not None else "?"

    def wrap_paint(cls: type):
        method = cls.paintEvent

        @functools.wraps(method)
        def paint(self, event):
            rect = event.rect()
            label = f"paint {owner(self)} {type(self).__name__} {rect.width()}x{rect.height()}"
            return TRACE.run(label, lambda: method(self, event))

        cls.paintEvent = paint

    wrap_paint(pg.GraphicsView)
    wrap_paint(GraphCanvas)


def _queued_s() -> float:
    """Seconds this thread has been ready to run but waited for a CPU (Linux schedstat; 0
    where there is none)."""
    try:
        with open("/proc/thread-self/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def measure_stall(example: str, percent: float, solver: str, limit: float) -> dict:
    """Solve ``example`` in the real window, print the event loop's longest gaps and return
    a summary (the longest gap and what ran in it)."""
    from dataclasses import replace

    from PySide6.QtCore import QStandardPaths, QTimer

    from app.main_window import MainWindow
    from app.settings import AppSettings
    from solver.optimize.bounds import no_remat_peak

    QStandardPaths.setTestModeEnabled(True)  # throw-away settings
    app = QApplication.instance()
    settings = AppSettings()
    settings.clear()
    window = MainWindow(settings)
    window.resize(1600, 1000)
    window.show()
    window.open_example(example)
    graph = window.document.graph
    gpu = next(d for d in graph.devices if d.kind == "gpu")
    budget = gpu.fixed_memory + int(percent / 100 * no_remat_peak(graph))
    window.document.set_memory_limits({gpu.name: budget})
    window.document.set_settings(
        replace(window.document.settings, backend=solver, time_limit_s=limit)
    )
    for _ in range(5):  # the first layout and paint of the opened graph are not the solve's
        app.processEvents()
    # (wall s, GUI-thread CPU s, at s, s the GUI thread was ready but waited for a CPU)
    gaps: list[tuple[float, float, float, float]] = []
    state = {"wall": time.perf_counter(), "cpu": time.thread_time(), "queued": _queued_s()}
    start = state["wall"]
    TRACE.spans.clear()

    def tick() -> None:
        wall, cpu, queued = time.perf_counter(), time.thread_time(), _queued_s()
        gaps.append(
            (
                wall - state["wall"],
                cpu - state["cpu"],
                state["wall"] - start,
                queued - state["queued"],
            )
        )
        state["wall"], state["cpu"], state["queued"] = wall, cpu, queued

    collections: list[tuple[int, float, float]] = []  # (generation, ms, at s)

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            state["gc"] = time.perf_counter()
        elif "gc" in state:
            now = time.perf_counter()
            collections.append((info["generation"], (now - state["gc"]) * 1000, now - start))

    gc.callbacks.append(on_gc)
    timer = QTimer(interval=10)
    timer.timeout.connect(tick)
    provisional = []
    window.document.result_changed.connect(
        lambda: provisional.append(window.document.is_provisional)
    )
    window.controller.finished.connect(lambda _r: QTimer.singleShot(300, app.quit))
    window.controller.failed.connect(lambda _m: QTimer.singleShot(300, app.quit))
    timer.start()
    window.window_actions.solve.trigger()
    app.exec()  # until 300 ms after the result (its drawing included)
    timer.stop()
    gc.callbacks.remove(on_gc)
    result = window.document.result
    window.document.undo_stack.setClean()
    window.controller.shutdown()
    window.close()
    worst = sorted(gaps, reverse=True)[:5]
    print(
        f"{example}, gpu at {percent:g}% of its peak, {solver} {limit:g} s: "
        f"{result.status.value if result else 'no result'}, "
        f"{sum(provisional)} provisional incumbents drawn; {len(gaps)} ticks over "
        f"{time.perf_counter() - start:.1f} s"
    )
    print(
        f"gaps > 50 ms: {sum(g[0] > 0.05 for g in gaps)}; longest "
        "(wall ms / GUI CPU ms / waiting for a CPU ms @ s):"
    )
    for wall, cpu, at, queued in worst:
        print(f"  {wall * 1000:7.1f} / {cpu * 1000:6.1f} / {queued * 1000:6.1f} @ {at:6.2f}")
        for ms, cpu, label in TRACE.inside(start + at, start + at + wall)[:12]:
            print(f"        {ms:6.1f} ms (CPU {cpu:5.1f})  {label}")
    idle = [g for g in gaps if g[1] < 0.001]  # the window did (almost) nothing in these
    idle_wall = max((g[0] for g in idle), default=0.0) * 1000
    idle_queued = max((g[3] for g in idle), default=0.0) * 1000
    print(
        f"{len(idle)} gaps with < 1 ms of GUI work: longest {idle_wall:.1f} ms, waiting for a "
        f"CPU up to {idle_queued:.1f} ms (what the machine's load alone costs)"
    )
    busy = max((g[1] for g in gaps), default=0.0)
    print(f"longest GUI-thread CPU burst between ticks: {busy * 1000:.1f} ms; the busiest gaps:")
    for wall, cpu, at, queued in sorted(gaps, key=lambda g: -g[1])[:3]:
        print(f"  {wall * 1000:7.1f} / {cpu * 1000:6.1f} / {queued * 1000:6.1f} @ {at:6.2f}")
        for ms, used, label in TRACE.inside(start + at, start + at + wall)[:12]:
            print(f"        {ms:6.1f} ms (CPU {used:5.1f})  {label}")
    slow = [c for c in collections if c[1] > 10]
    print(
        f"garbage collections: {len(collections)}, longest "
        f"{max((c[1] for c in collections), default=0):.1f} ms; > 10 ms: "
        + (", ".join(f"gen {g} {ms:.0f} ms @ {at:.2f} s" for g, ms, at in slow) or "none")
    )
    wall, cpu, at, queued = worst[0] if worst else (0.0, 0.0, 0.0, 0.0)
    inside = sorted(
        (x for x in TRACE.inside(start + at, start + at + wall) if not x[2].startswith(" ")),
        reverse=True,
    )
    return {
        "status": result.status.value if result else "no result",
        "provisional": sum(provisional),
        "gap_ms": wall * 1000,
        "cpu_ms": cpu * 1000,
        "queued_ms": queued * 1000,
        "at_s": at,
        "over_50": sum(g[0] > 0.05 for g in gaps),
        "idle_gap_ms": idle_wall,
        "ran": inside[0][2] if inside else "-",
        "ran_ms": inside[0][0] if inside else 0.0,
    }


def measure_streaming(ops: int, seconds: float, rate: float, trace: bool = False) -> dict:
    """The window on the synthetic ``ops``-operation schedule while a solve streams an
    incumbent ``rate`` times a second for ``seconds``, then ends: the event loop's longest
    gap (a 10 ms timer). The solve is played, not run: its worker is held, and replayed
    incumbents (as the child process sends them) are handed to it, so what is measured is
    the window's own work of drawing a 5,000-operation incumbent after another."""
    import copy
    from dataclasses import replace

    from PySide6.QtCore import QStandardPaths, QTimer

    from app.main_window import MainWindow
    from app.settings import AppSettings
    from app.solve_process import ProvisionalSchedule
    from app.workers import ProcessWorker
    from solver.status import Progress

    QStandardPaths.setTestModeEnabled(True)
    app = QApplication.instance()
    settings = AppSettings()
    settings.clear()
    settings.set_tour_seen(True)
    ProcessWorker.start = lambda self, pool=None: None  # the solve is played below
    graph = synthetic_graph(ops // 2 + 1)
    results = [make_result(graph) for _ in range(3)]
    window = MainWindow(settings)
    window.resize(1600, 1000)
    window.show()
    window.document.open(graph)
    for _ in range(20):
        app.processEvents()
    window.controller.solve()
    worker = window.controller.current_worker
    gaps: list[float] = []
    ends: list[float] = []
    state = {"last": time.perf_counter(), "sent": 0}
    started = time.perf_counter()
    TRACE.spans.clear()

    def tick() -> None:
        now = time.perf_counter()
        gaps.append(now - state["last"])
        ends.append(now)
        state["last"] = now

    def send() -> None:
        k = state["sent"]
        # a solve's every incumbent is a new schedule and timeline (replayed in the child):
        # fresh objects, so that nothing drawn for an earlier one is reused by identity
        result = results[k % len(results)]
        result = replace(result, schedule=copy.copy(result.schedule))
        result = replace(result, timeline=copy.copy(result.timeline))
        elapsed = time.perf_counter() - started
        cost = result.objective * (1 + 0.5 / (k + 1))  # not total_ms: a sum per call
        worker.signals.progress.emit(Progress(elapsed, cost, 0.8 * cost, 0.2, "Cbc0010I line"))
        worker.signals.progress.emit(
            ProvisionalSchedule(elapsed, cost, result.schedule, result.timeline)
        )
        state["sent"] = k + 1
        if elapsed >= seconds:
            feeder.stop()
            worker.signals.finished.emit(results[0])
            QTimer.singleShot(800, app.quit)

    timer = QTimer(interval=10)
    timer.timeout.connect(tick)
    feeder = QTimer(interval=int(1000 / rate))
    feeder.timeout.connect(send)
    timer.start()
    feeder.start()
    app.exec()
    timer.stop()
    window.document.undo_stack.setClean()
    window.controller.shutdown()
    window.close()
    longest = sorted(gaps, reverse=True)[:5]
    print(
        f"streaming: {state['sent']} incumbents of {len(results[0].timeline.ops)} operations "
        f"over {seconds:g} s ({rate:g}/s) and the final result; {len(gaps)} ticks; longest "
        f"gaps {', '.join(f'{g * 1000:.0f}' for g in longest)} ms; gaps > 50 ms: "
        f"{sum(g > 0.05 for g in gaps)}"
    )
    if trace:  # what ran in the longest gaps (--trace)
        for gap, end in sorted(zip(gaps, ends, strict=True), reverse=True)[:8]:
            print(f"  {gap * 1000:7.1f} ms ending @ {end - started:6.2f} s")
            for ms, cpu, label in TRACE.inside(end - gap, end)[:14]:
                print(f"        {ms:6.1f} ms (CPU {cpu:5.1f})  {label}")
    return {"gap_ms": longest[0] * 1000 if longest else 0.0}


def stall_runs(argv: list[str], runs: int) -> int:
    """Run the stall measurement ``runs`` times, each in a fresh process, and tabulate the
    longest gap of each run (what a first incumbent costs is only seen in a fresh window)."""
    import json
    import subprocess

    rows = []
    for k in range(runs):
        done = subprocess.run(
            [sys.executable, __file__, *argv, "--runs", "1", "--json"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"run {k + 1} failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(lines[-1])
        rows.append(row)
        print(
            f"run {k + 1:2}: {row['status']:>10}, {row['provisional']:2} provisional; longest gap "
            f"{row['gap_ms']:6.1f} ms (GUI CPU {row['cpu_ms']:5.1f}, waiting for a CPU "
            f"{row['queued_ms']:5.1f}, blocked "
            f"{row['gap_ms'] - row['cpu_ms'] - row['queued_ms']:5.1f}) @ {row['at_s']:5.2f} s; "
            f"gaps > 50 ms: {row['over_50']}; longest in it: {row['ran']} {row['ran_ms']:.1f} ms; "
            f"longest gap with < 1 ms of GUI work {row['idle_gap_ms']:.1f} ms",
            flush=True,
        )
    if rows:
        longest = sorted(r["gap_ms"] for r in rows)
        print(
            f"{len(rows)} runs: longest gap min {longest[0]:.1f} / median "
            f"{statistics.median(longest):.1f} / max {longest[-1]:.1f} ms; runs with a gap > "
            f"50 ms: {sum(g > 50 for g in longest)}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=5000, help="operations (about 2 per stage)")
    parser.add_argument("--repeat", type=int, default=10, help="samples per timing (median)")
    parser.add_argument("--stall", metavar="EXAMPLE", help="measure event-loop gaps in a solve")
    parser.add_argument("--gpu-percent", type=float, default=60.0)
    parser.add_argument("--solver", default="highs")
    parser.add_argument("--limit", type=float, default=30.0, help="solver time limit (s)")
    parser.add_argument("--runs", type=int, default=1, help="--stall: runs, each a new process")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--cpu", action="store_true", help="time the tables in GUI-thread CPU time, not wall time"
    )
    parser.add_argument(
        "--stream",
        type=float,
        metavar="SECONDS",
        help="measure event-loop gaps while a played solve streams --ops-operation incumbents",
    )
    parser.add_argument("--rate", type=float, default=4.0, help="--stream: incumbents a second")
    parser.add_argument(
        "--trace", action="store_true", help="--stream: list what ran in the longest gaps"
    )
    args = parser.parse_args(argv)
    if args.stall and args.runs > 1:
        rest = [a for a in (argv if argv is not None else sys.argv[1:])]
        at = rest.index("--runs") if "--runs" in rest else None
        if at is not None:
            del rest[at : at + 2]
        return stall_runs(rest, args.runs)
    traced = args.stall or (args.stream and args.trace)
    app = QApplication.instance() or (timed_application() if traced else QApplication([]))
    apply_theme(app, "light")
    if args.stream:
        if args.trace:
            trace_slots()
        measure_streaming(args.ops, args.stream, args.rate, args.trace)
        return 0
    if args.stall:
        trace_slots()
        summary = measure_stall(args.stall, args.gpu_percent, args.solver, args.limit)
        if args.json:
            import json

            print(json.dumps(summary))
        return 0
    if args.cpu:
        CLOCK[0] = time.thread_time
    gc.freeze()  # as the window does at startup (app.main_window.run); the graphs come after
    stages = args.ops // 2 + 1
    started = time.perf_counter()
    graph = synthetic_graph(stages)
    results = [make_result(graph), make_result(graph)]
    timeline = results[0].timeline
    print(
        f"schedule: {len(timeline.ops)} operations, {len(timeline.transfers)} transfers, "
        f"{timeline.recomputations} recomputations, {stages} stages "
        f"(built and replayed in {time.perf_counter() - started:.2f} s); "
        f"view 1600x900 offscreen; median of {args.repeat}; "
        f"{'GUI-thread CPU' if args.cpu else 'wall'} ms"
    )
    rows = [
        bench_view("GanttView", GanttView, graph, results, args.repeat),
        bench_view("MemoryView", MemoryView, graph, results, args.repeat),
        bench_view("ScheduleView", ScheduleView, graph, results, args.repeat),
        bench_view("MatricesView", MatricesView, graph, results, max(2, args.repeat // 5)),
        bench_view("TensorMemoryView", TensorMemoryView, graph, results, args.repeat),
        bench_view("GraphView", GraphView, graph, results, max(2, args.repeat // 5)),
        bench_view("StepperPanel", StepperPanel, graph, results, args.repeat),
    ]
    header = (
        "view", "first draw ms", "redraw ms", "pan frame ms", "pan 2% ms", "hover ms", "step ms"
    )  # fmt: skip
    print_table(header, rows)
    print()
    print(
        "graph view, 1600x900: layout = module folding + layering + wrapping; frames at Fit "
        "and zoomed in 8x"
    )
    modular = synthetic_modular_graph(args.ops)
    graphs = [
        ("chain", bench_graph_layout(synthetic_graph(args.ops), False, args.repeat)),
        ("modular, all", bench_graph_layout(modular, False, args.repeat)),
        ("modular, folded", bench_graph_layout(modular, True, args.repeat)),
    ]
    header = (
        "graph", "nodes", "boxes", "layout ms", "first draw ms", "pan fit ms", "zoom fit ms",
        "pan 8x ms", "zoom 8x ms",
    )  # fmt: skip
    print_table(header, [[name, *row] for name, row in graphs])
    return 0


def print_table(header: tuple[str, ...], rows: list[list]) -> None:
    print(" | ".join(f"{h:>16}" for h in header))
    print(" | ".join("-" * 16 for _ in header))
    for row in rows:
        cells = [f"{row[0]:>16}"] + [
            f"{'-':>16}"
            if v != v
            else f"{v:16d}"
            if isinstance(v, int)
            else f"{v:16.1f}"
            if v >= 1
            else f"{v:16.3f}"
            for v in row[1:]
        ]
        print(" | ".join(cells))


if __name__ == "__main__":
    raise SystemExit(main())
