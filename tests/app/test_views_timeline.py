"""The Gantt chart as a Perfetto-like timeline: keys, wheel, overview, search, flows, measured
ranges, a pluggable timeline source and the Chrome trace export.

The hand-built schedule (tests/data): gpu runs a [0, 1], b [1, 3], c [3, 4], a again [4, 5];
gpu -> cpu copies a [5, 6] and c [6, 7] for d, which runs on the cpu [7, 11].
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.export import chrome_trace, export_chrome_trace
from app.views.gantt import GanttView
from app.views.gantt_geometry import flow_segments
from app.views.timeline_nav import PAN_STEP, ZOOM_STEP


@pytest.fixture
def view(document, show):
    return show(GanttView(document), 900, 360)


def x_range(view: GanttView) -> tuple[float, float]:
    (x0, x1), _ = view.plot.getViewBox().viewRange()
    return x0, x1


def chart(view: GanttView):
    return view.plot.getViewBox().scene().views()[0]


def test_timeline_keys_zoom_and_pan(qtbot, view):
    view.plot.setXRange(2.0, 6.0, padding=0)
    widget = chart(view)
    widget.setFocus()
    QTest.keyClick(widget, Qt.Key.Key_W)
    x0, x1 = x_range(view)
    assert (x1 - x0) == pytest.approx(4.0 / ZOOM_STEP) and (x0 + x1) / 2 == pytest.approx(4.0)
    QTest.keyClick(widget, Qt.Key.Key_S)
    assert x_range(view) == pytest.approx((2.0, 6.0))
    QTest.keyClick(widget, Qt.Key.Key_D)
    assert x_range(view) == pytest.approx((2.0 + 4 * PAN_STEP, 6.0 + 4 * PAN_STEP))
    QTest.keyClick(widget, Qt.Key.Key_A)
    assert x_range(view) == pytest.approx((2.0, 6.0))


def _wheel(widget, steps: int, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    point = QPointF(widget.viewport().rect().center())
    event = QWheelEvent(
        point,
        QPointF(widget.viewport().mapToGlobal(point.toPoint())),
        QPoint(0, 0),
        QPoint(0, 120 * steps),
        Qt.MouseButton.NoButton,
        modifiers,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget.viewport(), event)


def test_timeline_wheel_pans_and_ctrl_wheel_zooms(view):
    view.plot.setXRange(2.0, 6.0, padding=0)
    _wheel(chart(view), -1)  # scroll down: later times, same width
    x0, x1 = x_range(view)
    assert x1 - x0 == pytest.approx(4.0) and x0 > 2.0
    _wheel(chart(view), 1, Qt.KeyboardModifier.ControlModifier)
    y0, y1 = x_range(view)
    assert y1 - y0 == pytest.approx(4.0 / ZOOM_STEP)


def test_timeline_overview_shows_and_moves_the_visible_window(view):
    view.plot.setXRange(2.0, 6.0, padding=0)
    assert view.overview.visible_window() == pytest.approx((2.0, 6.0))
    view.overview.region.setRegion((5.0, 9.0))
    assert x_range(view) == pytest.approx((5.0, 9.0))
    bars = view.overview.bars.opts  # each lane's busy spans: gpu 0..5, the link 5..7, cpu 7..11
    spans = sorted(zip(bars["x0"], bars["x0"] + bars["width"], strict=True))
    assert spans == [(0.0, 5.0), (5.0, 7.0), (7.0, 11.0)]


def test_timeline_search_selects_the_node_in_every_view(qtbot, view, document):
    assert view.find("B") == ["b"]
    assert document.selection == "b"
    assert list(view.layer("selection").opts["x0"]) == [1.0]  # b's bar, outlined
    assert view.find("") == [] and document.selection == "b"  # an empty search keeps it
    view.find("a")  # "a" only (ids a, b, c, d)
    assert document.selection == "a"
    assert view.find_next() == "a"  # one match: stays


def test_timeline_flows_lead_from_each_copy_to_its_consumer(view, document):
    lanes = view.lanes
    x, y = view.flows.getData()
    link, cpu = lanes.index("gpu \u2192 cpu"), lanes.index("cpu")
    assert list(x) == [6.0, 7.0, 7.0, 7.0]  # copy a ends at 6, copy c at 7; d starts at 7
    assert list(y) == [link, cpu, link, cpu]
    lane_of = {name: j for j, name in enumerate(lanes)}
    _, _, tips_x, tips_y = flow_segments(document.timeline, lane_of, only="c")
    assert list(tips_x) == [7.0] and list(tips_y) == [cpu]


def test_timeline_measured_range_totals_busy_and_idle(view):
    view.select_range(0.5, 6.5)
    assert view.busy_in_range("gpu", 0.5, 6.5) == pytest.approx(4.5)  # 0.5..5
    assert view.busy_in_range("gpu \u2192 cpu", 0.5, 6.5) == pytest.approx(1.5)  # 5..6.5
    assert view.busy_in_range("cpu", 0.5, 6.5) == 0.0
    text = view.range_text
    assert "gpu busy 4.5 ms (75%), idle 1.5 ms" in text
    assert "cpu busy 0 ms (0%), idle 6 ms" in text
    view.select_range(None)
    assert view.range_text == ""


def test_timeline_shift_drag_selects_a_range(qtbot, view):
    vb = view.plot.getViewBox()
    widget = chart(view)

    def at(t: float) -> QPoint:
        return widget.mapFromScene(vb.mapViewToScene(QPointF(t, 1.0)))

    QTest.mousePress(
        widget.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier, at(1.0)
    )
    for t in (2.0, 3.0, 4.0):
        QTest.mouseMove(widget.viewport(), at(t))
    QTest.mouseRelease(
        widget.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier, at(4.0)
    )
    qtbot.waitUntil(lambda: view.range_text != "")
    assert "gpu busy" in view.range_text


def test_timeline_source_can_be_replaced(view, document):
    other = replace(
        document.timeline,
        ops=tuple(
            replace(op, start=op.start + 100, end=op.end + 100) for op in document.timeline.ops
        ),
    )
    view.set_timeline_source(lambda _doc: other)
    assert view.timeline() is other
    assert min(view.layer("forward").opts["x0"]) == pytest.approx(100.0)
    view.set_timeline_source(None)
    assert view.timeline() is document.timeline
    assert min(view.layer("forward").opts["x0"]) == pytest.approx(0.0)


def test_window_arrows_pan_the_focused_chart_and_step_otherwise(qtbot, make_window):
    window = make_window("chain")
    with qtbot.waitSignal(window.controller.finished, timeout=60_000):
        window.window_actions.solve.trigger()
    gantt = window.schedule_tabs.widget(0).gantt
    window.document.set_cursor(2)
    widget = chart(gantt)
    widget.setFocus()
    qtbot.waitUntil(widget.hasFocus)
    before = x_range(gantt)
    QTest.keyClick(widget, Qt.Key.Key_Right)
    assert x_range(gantt)[0] > before[0] and window.document.cursor == 2
    window.stepper.setFocus()
    qtbot.waitUntil(window.stepper.hasFocus)
    QTest.keyClick(window.stepper, Qt.Key.Key_Right)
    assert window.document.cursor == 3


def test_chrome_trace_has_one_complete_event_per_op_and_copy(document, tmp_path):
    timeline = document.timeline
    path = tmp_path / "schedule.trace.json"
    export_chrome_trace(timeline, path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(timeline.ops) + len(timeline.transfers) == 7
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    ops = sorted((e["ts"], e["dur"], names[e["tid"]], e["name"], e["cat"]) for e in complete)
    assert ops == [
        (0.0, 1000.0, "gpu", "a", "forward"),
        (1000.0, 2000.0, "gpu", "b", "forward"),
        (3000.0, 1000.0, "gpu", "c", "loss"),
        (4000.0, 1000.0, "gpu", "a", "recompute"),
        (5000.0, 1000.0, "gpu \u2192 cpu", "copy a", "transfer"),
        (6000.0, 1000.0, "gpu \u2192 cpu", "copy c", "transfer"),
        (7000.0, 4000.0, "cpu", "d", "backward"),
    ]
    assert chrome_trace(timeline)["displayTimeUnit"] == "ms"
    assert np.isclose(max(e["ts"] + e["dur"] for e in complete), timeline.total_ms * 1000)


def test_window_exports_the_chrome_trace_from_the_file_menu(
    qtbot, make_window, monkeypatch, tmp_path
):
    from app.dialogs import FileDialog

    window = make_window("chain")
    assert not window.window_actions.export_trace.isEnabled()
    with qtbot.waitSignal(window.controller.finished, timeout=60_000):
        window.window_actions.solve.trigger()
    assert window.window_actions.export_trace.isEnabled()
    path = tmp_path / "chain.trace.json"
    monkeypatch.setattr(FileDialog, "save_path", classmethod(lambda cls, *a: str(path)))
    window.window_actions.export_trace.trigger()
    events = json.loads(path.read_text())["traceEvents"]
    timeline = window.document.timeline
    assert sum(e["ph"] == "X" for e in events) == len(timeline.ops) + len(timeline.transfers)
    assert window.statusBar().currentMessage() == "Exported chain.trace.json"


def test_chrome_trace_has_memory_counters_and_copy_flows(document):
    """No memory counter tracks and no flow events for copies (issue 20, item 9)."""
    timeline = document.timeline
    events = chrome_trace(timeline)["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    gpu = [(e["ts"], e["args"]["bytes"]) for e in counters if e["name"] == "gpu memory"]
    curve = timeline.memory["gpu"]
    assert max(b for _, b in gpu) == int(curve.bytes.max())
    assert gpu[0] == (0.0, int(curve.bytes[0]))
    budget = {e["args"]["bytes"] for e in counters if e["name"] == "gpu activation budget"}
    assert budget == {timeline.activation_budgets["gpu"]}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) == len(timeline.transfers) == 2
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    for k, start in starts.items():
        end = ends[k]
        assert names[start["tid"]] == "gpu \u2192 cpu" and names[end["tid"]] == "cpu"
        assert end["ts"] >= start["ts"]
        assert end["bp"] == "e"
    d = next(op for op in timeline.ops if op.node == "d")
    assert {e["ts"] for e in ends.values()} == {d.start * 1000 + 0.001}


def test_window_exports_the_concurrent_timeline_when_it_is_shown(
    qtbot, make_window, monkeypatch, tmp_path
):
    """The trace was always the serial timeline, even with the concurrent one on display."""
    from app.dialogs import FileDialog
    from solver.optimize.methods import solve

    window = make_window("chain")
    window.document.set_result(solve(window.document.graph, "greedy"))
    schedule = window.schedule_tabs.widget(0)
    schedule.concurrent_action.setChecked(True)
    shown = schedule.gantt.timeline()
    assert shown is not window.document.timeline
    path = tmp_path / "chain.trace.json"
    monkeypatch.setattr(FileDialog, "save_path", classmethod(lambda cls, *a: str(path)))
    window.window_actions.export_trace.trigger()
    events = json.loads(path.read_text())["traceEvents"]
    ends = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X")
    assert ends == pytest.approx(max(op.end for op in shown.ops) * 1000, abs=1)
    process = next(e for e in events if e["name"] == "process_name")
    assert "concurrent" in process["args"]["name"]


def test_window_export_dialog_avoids_the_bundled_examples_folder(make_window, monkeypatch):
    from app.dialogs import FileDialog
    from solver.document.examples import GRAPHS_DIR
    from solver.optimize.methods import solve

    window = make_window("chain")
    window.settings.set_last_dir(str(GRAPHS_DIR / "chain.graph.json"))
    window.document.set_result(solve(window.document.graph, "greedy"))
    offered = []
    monkeypatch.setattr(
        FileDialog, "save_path", classmethod(lambda cls, p, c, where, f: offered.append(where))
    )
    window.window_actions.export_trace.trigger()
    assert offered and not offered[0].startswith(str(GRAPHS_DIR.parent))


def test_timeline_keys_zoom_about_the_time_under_the_mouse(view):
    """Zoom about the mouse, as in Perfetto (it zoomed about the middle)."""
    view.plot.setXRange(0.0, 10.0, padding=0)
    assert view.navigate(Qt.Key.Key_W, center=2.0)
    x0, x1 = x_range(view)
    assert (2.0 - x0) / (x1 - x0) == pytest.approx(0.2)  # 2 ms stays where it was
    assert x1 - x0 == pytest.approx(10.0 / ZOOM_STEP)


def test_timeline_f_focuses_the_selection(view, document):
    document.set_selection("d")  # d runs 7-11 ms on the cpu
    view.plot.setXRange(0.0, 2.0, padding=0)
    widget = chart(view)
    widget.setFocus()
    QTest.keyClick(widget, Qt.Key.Key_F)
    x0, x1 = x_range(view)
    assert x0 <= 7.0 and x1 >= 11.0 and x1 - x0 < 6.0
    view.select_range(1.0, 3.0)
    QTest.keyClick(widget, Qt.Key.Key_F)  # a measured range wins
    x0, x1 = x_range(view)
    assert x0 == pytest.approx(0.9) and x1 == pytest.approx(3.1)


def test_timeline_range_has_a_slice_table_by_kind(view):
    view.select_range(0.0, 5.0)  # a, b, c and the recomputed a on the gpu
    table = view.slice_table
    assert table.isVisibleTo(view)
    rows = {table.item(r, 0).text(): table.item(r, 1).text() for r in range(table.rowCount())}
    assert rows == {"forward": "2", "loss": "1", "recompute": "1"}
    assert table.item(0, 2).text() == "3 ms"  # a and b: 1 + 2 ms
    view.select_range(None)
    assert not table.isVisibleTo(view)
