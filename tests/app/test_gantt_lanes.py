"""The Gantt chart's lane table: built from arrays once per timeline (issue 20: rebuilding it
took 12 ms of every redraw of a 5,000-operation incumbent), with the bars it always had."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from app.views.gantt import GanttView
from app.views.gantt_lanes import Bar, LaneTable, lane_names, link_lane


@pytest.fixture
def view(document, show):
    return show(GanttView(document), 900, 320)


def naive_rows(lanes, timeline) -> list[list[Bar]]:
    """The table's rows as the first version built them: a Bar per event, sorted by start."""
    lane_of = {name: j for j, name in enumerate(lanes)}
    rows: list[list[Bar]] = [[] for _ in lanes]
    for j, op in enumerate(timeline.ops):
        rows[lane_of[op.device]].append(Bar("op", j, lane_of[op.device], op.start, op.end, op.node))
    for j, tr in enumerate(timeline.transfers):
        lane = lane_of[link_lane(tr.source, tr.target)]
        rows[lane].append(Bar("transfer", j, lane, tr.start, tr.end, tr.tensor))
    for row in rows:
        row.sort(key=lambda b: b.start)
    return rows


def test_lane_table_holds_the_bars_of_every_event_by_start(document):
    timeline = document.timeline
    lanes = lane_names(document.graph, timeline)
    table = LaneTable(lanes, timeline)
    expected = naive_rows(lanes, timeline)
    assert [list(row) for _, _, row in table.rows] == expected
    for (starts, ends, row), bars in zip(table.rows, expected, strict=True):
        assert starts.tolist() == [b.start for b in bars]
        assert ends.tolist() == [b.end for b in bars]
        assert [row[k] for k in range(len(row))] == bars
    for node in {op.node for op in timeline.ops}:
        assert table.bars_of(node) == [b for row in expected for b in row if b.node == node]
    assert table.bars_of("no such node") == []


def test_lanes_are_built_once_per_timeline(view, document, monkeypatch):
    built = []
    real = LaneTable.__init__

    def counted(self, lanes, timeline):
        built.append(timeline)
        real(self, lanes, timeline)

    monkeypatch.setattr(LaneTable, "__init__", counted)
    view.on_theme_changed()  # redraws the same timeline
    view.set_compared(document.result)  # an overlay: redraws it again
    view.set_compared(None)
    view.flush()
    assert built == []  # the table drawn first is the one reused
    result = document.result
    document.set_result(replace(result, timeline=copy.copy(result.timeline)))
    view.flush()
    assert len(built) == 1  # a new timeline object (the next incumbent): a new table
    view.on_theme_changed()
    assert len(built) == 1


def test_many_recomputations_get_the_fast_one_pixel_outline(view, document, monkeypatch):
    """Qt strokes a 1.4 px outline on a slow path: 6.5 ms of every paint of a 5,000-operation
    schedule's recomputations (issue 20); that many bars get a 1 px one."""
    import app.views.gantt_layers as gantt_layers

    layer = view.layer("recompute:forward")
    assert len(layer.opts["x0"]) == 1
    assert layer.opts["pen"].widthF() == pytest.approx(1.4)
    monkeypatch.setattr(gantt_layers, "WIDE_OUTLINES_UP_TO", 0, raising=False)
    document.set_result(replace(document.result, timeline=copy.copy(document.timeline)))
    view.flush()
    assert layer.opts["pen"].widthF() == pytest.approx(1.0)
    view.on_theme_changed()  # a new palette keeps the choice
    assert layer.opts["pen"].widthF() == pytest.approx(1.0)
