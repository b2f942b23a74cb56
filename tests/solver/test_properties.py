"""Property-based tests: no input makes the loader or the solver crash with a traceback."""

from __future__ import annotations

import copy

from handmade import SPEC_EXAMPLE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import small_graphs

from solver.document.graph_io import graph_from_dict
from solver.errors import GraphFormatError
from solver.execution.simulate import check_schedule
from solver.optimize.methods import solve
from solver.optimize.solve import SolveOptions
from solver.status import SolveStatus

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10**10)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(json_values)
def test_loader_on_random_json_raises_only_format_errors(doc):
    try:
        graph_from_dict(doc)
    except GraphFormatError as exc:
        assert str(exc)


def _paths(doc, prefix=()):
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


PATHS = list(_paths(SPEC_EXAMPLE))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PATHS), json_values, st.booleans())
def test_loader_on_corrupted_spec_example_raises_only_format_errors(path, value, delete):
    doc = copy.deepcopy(SPEC_EXAMPLE)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    try:
        graph_from_dict(doc)
    except GraphFormatError as exc:
        assert str(exc)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_graphs())
def test_every_method_on_random_graphs_returns_a_replayable_schedule_or_a_reason(doc):
    graph = graph_from_dict(doc)
    results = {
        m: solve(graph, m, SolveOptions(time_limit_s=20))
        for m in ("xengine", "checkmate", "checkpoint-all", "chen-greedy")
    }
    for method, result in results.items():
        if result.ok:
            check_schedule(graph, result.schedule)
        else:
            assert result.message, method
    xengine = results["xengine"]
    if xengine.status is SolveStatus.OPTIMAL:
        for result in results.values():  # the optimum over all devices beats every baseline
            if result.ok:
                assert xengine.timeline.total_ms <= result.timeline.total_ms + 1e-6
    elif any(r.ok for r in results.values()):
        raise AssertionError(f"xengine says {xengine.status} but a baseline fits")
