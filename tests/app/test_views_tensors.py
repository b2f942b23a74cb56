"""Memory per tensor: stacked bands per device, origins marked, hover says why, click selects.

The hand-built schedule (tests/data): gpu computes a [0, 1], b [1, 3] (reading a), c [3, 4]
(reading b), recomputes a [4, 5]; a and c are copied to the cpu [5, 6], [6, 7] for d [7, 11].
Sizes: a 1 MiB, b 2 MiB, c 1 MiB, d 1 MiB.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.views.tensor_bands import resident_text
from app.views.tensors import ORIGINS, TensorMemoryView, resident_reason

MiB = 2**20


@pytest.fixture
def view(document, show):
    return show(TensorMemoryView(document), 900, 500)


def bands_of(view, device):
    graph = view._document.graph
    b = view.bands(device)
    return [
        (float(x), float(x + w), graph.nodes[k].id, y / MiB, h / MiB, ORIGINS[o])
        for x, w, k, y, h, o in zip(b.x0, b.width, b.node, b.y0, b.height, b.origin, strict=True)
    ]


def test_tensor_bands_stack_to_the_memory_curve(view, document):
    assert bands_of(view, "gpu")[:5] == [
        (0.0, 1.0, "a", 0.0, 1.0, "computed"),
        (1.0, 3.0, "a", 0.0, 1.0, "computed"),
        (1.0, 3.0, "b", 1.0, 2.0, "computed"),
        (3.0, 4.0, "b", 0.0, 2.0, "computed"),
        (3.0, 4.0, "c", 2.0, 1.0, "computed"),
    ]
    assert bands_of(view, "gpu")[5][2:] == ("a", 0.0, 1.0, "recomputed")
    for device, curve in document.timeline.memory.items():
        b = view.bands(device)
        for start, used in zip(curve.times, curve.bytes, strict=True):
            at = b.x0 == start
            assert b.height[at].sum() == used  # the stack's outline is the memory curve


def test_tensor_bands_mark_copies_and_are_one_item_per_device(view):
    cpu = bands_of(view, "cpu")
    assert {(n, o) for _, _, n, _, _, o in cpu} == {
        ("a", "copied"),
        ("c", "copied"),
        ("d", "computed"),
    }
    for device in ("cpu", "gpu"):
        assert len(view.layer(device).opts["x0"]) == len(view.bands(device).x0)


def test_tensor_hover_says_why_a_tensor_is_resident(view, document):
    assert "read by b, running now" in view.tooltip_at("gpu", 1.5, 0.5 * MiB)
    assert "<b>c</b> on gpu: 1.0 MiB, computed" in view.tooltip_at("gpu", 4.5, 1.5 * MiB)
    assert "copied to cpu for d at 6 ms" in view.tooltip_at("gpu", 4.5, 1.5 * MiB)
    assert view.tooltip_at("gpu", 4.5, 2.5 * MiB) == ""  # above the stack
    graph, timeline = document.graph, document.timeline
    assert resident_reason(graph, timeline, "cpu", "d", 10.0) == (
        "kept (a checkpoint), not read here again"
    )


def test_tensor_click_selects_and_outlines_everywhere(view, document):
    assert view.select_at("cpu", 8.0, 1.5 * MiB) == "c"
    assert document.selection == "c"
    for device in ("cpu", "gpu"):
        outlined = view.selected_layer(device).opts["x0"]
        assert len(outlined) == int((view.bands(device).node == 2).sum()) > 0


def test_tensor_step_cursor_lists_the_exact_resident_set(view, document):
    document.set_cursor(4)  # d on the cpu, at 7 ms
    text = view.cursor_text
    assert text.startswith("step 4: d on cpu")
    assert "gpu holds a, c (2.0 MiB)" in text and "cpu holds a, c, d (3.0 MiB)" in text
    document.set_cursor(None)
    assert view.cursor_text == ""
    assert not np.isnan(view.plot("gpu").getViewBox().viewRange()[0][1])


def test_tensor_view_redraws_a_hidden_tab_only_when_shown(view, document, handbuilt_result):
    from dataclasses import replace

    view.hide()
    shifted = replace(
        handbuilt_result,
        timeline=replace(
            handbuilt_result.timeline,
            memory={
                d: replace(c, times=c.times + 1.0)
                for d, c in handbuilt_result.timeline.memory.items()
            },
        ),
    )
    document.set_result(shifted)
    assert view.bands("gpu").x0[0] == 0.0  # not redrawn while hidden
    view.show()
    assert view.bands("gpu").x0[0] == 1.0


def test_tensor_diff_mode_outlines_another_schedule_and_names_the_difference(view, document):
    """Against checkpoint-all on the cpu (a, b, c, d all on the cpu; d starts at 13 ms)."""
    from solver.optimize.methods import solve

    other = solve(document.graph, "checkpoint-all:cpu")
    key = (document.structure_token, other.method, tuple(sorted(document.memory_limits.items())))
    document.cache_result(key, other)
    shown = document.result
    document.set_result(None)
    document.set_result(shown)
    assert view.compare_choices()[0] == "nothing" and len(view.compare_choices()) == 2
    assert view.compare_choices()[1].startswith("checkpoint-all:cpu \u00b7 17 ms")
    view.compare_with(other)
    x, y = view.other_curve("cpu").getData()
    assert list(x) == [0.0, 3.0, 11.0, 13.0, 17.0, 17.0]  # step edges, then the end
    assert list(y * view.scale("cpu") / MiB) == [1.0, 3.0, 4.0, 3.0, 0.0]
    document.set_cursor(4)  # d: here on the cpu at 7 ms with a, c copied in; there at 13 ms
    text = view.cursor_text
    assert "cpu holds a, c, d (3.0 MiB) vs 3.0 MiB there; only here: none; only there: none" in text
    assert "gpu holds a, c (2.0 MiB) vs 0 B there; only here: a, c; only there: none" in text
    view.compare_with(None)
    assert len(view.other_curve("cpu").getData()[0] or []) == 0


def test_a_running_workspace_tops_the_stack_and_says_what_it_is(document, show, graph):
    """A workspace (bytes a node needs only while it runs) is a band of its own on top of the
    resident tensors, so the stack's outline stays the memory curve; hover says it is no
    tensor and the step cursor counts it."""
    from dataclasses import replace as replaced

    from solver.editing.edits import set_node_fields
    from solver.execution.simulate import simulate

    g = set_node_fields(graph, "d", workspace=5 * MiB)
    result = replaced(document.result, timeline=simulate(g, document.result.schedule))
    document.set_graph(g)
    document.set_result(result)
    view = show(TensorMemoryView(document), 900, 500)
    curve = result.timeline.memory["cpu"]
    b = view.bands("cpu")
    for start, used in zip(curve.times, curve.bytes, strict=True):
        assert b.height[b.x0 == start].sum() == used  # still the memory curve
    d = next(op for op in result.timeline.ops if op.node == "d")
    assert (d.workspace, curve.workspace.max()) == (5 * MiB, 5 * MiB)
    top = [row for row in bands_of(view, "cpu") if row[5] == "workspace"]
    assert top == [(d.start, d.end, "d", 3.0, 5.0, "workspace")]  # on a, c (copies) and d
    text = view.tooltip_at("cpu", (d.start + d.end) / 2, 4 * MiB)
    assert text.startswith("<b>d</b> running on cpu: workspace 5.0 MiB")
    assert "needed only while it runs" in text
    assert len(view.layer("cpu").opts["x0"]) == len(b.x0)  # drawn, one rectangle per band
    step = resident_text(g, result.timeline, d, 3, None)
    assert "cpu holds a, c, d (8.0 MiB, 5.0 MiB of it the workspace of d)" in step


def test_a_device_that_holds_nothing_is_a_thin_row_saying_so(document, show, graph):
    """ResNet-50's CPU under XEngine at GPU 60 %: an empty 0-1 B axis took half the view."""
    from solver.optimize.methods import solve

    document.set_result(solve(graph, "checkpoint-all:cpu"))
    view = show(TensorMemoryView(document), 900, 500)
    cpu, gpu = view.plot("cpu"), view.plot("gpu")
    assert gpu.titleLabel.text.endswith("gpu: holds nothing in this schedule")
    assert cpu.titleLabel.text.endswith("cpu: resident tensors")
    assert gpu.size().height() <= 60 < cpu.size().height()
    assert view.bands("cpu").height.sum() > 0 and len(view.bands("gpu").x0) == 0


def test_tensor_view_draws_the_budget_line(view, document):
    """Memory per tensor had no budget line (issue 20)."""
    line = view.budget_line("gpu")
    budget = document.timeline.activation_budgets["gpu"]
    assert line.isVisible() and line.value() == pytest.approx(budget / view.scale("gpu"))
    _, (y0, y1) = view.plot("gpu").getViewBox().viewRange()
    assert y1 >= budget / view.scale("gpu")


def test_tensor_view_names_its_big_bands(view):
    assert "b" in view.band_labels("gpu")  # 2 MiB for 3 of the 11 ms
    assert "d" in view.band_labels("cpu") or "c" in view.band_labels("cpu")


def test_tensor_colours_tell_145_layers_apart():
    from app.views.tensor_style import layer_colour

    colours = [layer_colour(k) for k in range(145)]
    assert len({c.name() for c in colours}) == 145
    # neighbours differ clearly (in hue, saturation or brightness)
    for a, b in zip(colours, colours[1:], strict=False):
        delta = sum(abs(x - y) for x, y in zip(a.getRgb()[:3], b.getRgb()[:3], strict=True))
        assert delta > 60
