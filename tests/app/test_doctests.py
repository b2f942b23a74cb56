"""The examples in the GUI helper modules' docstrings run (the doctest option covers solver/)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "app.export",
    "app.widgets",
    "app.views.binding",
    "app.views.gantt_geometry",
    "app.views.gantt_lanes",
    "app.views.tensor_bands",
    "app.views.graph_hierarchy",
    "app.panels.solve_report",
    "app.panels.node_facts",
    "app.import_model",
    "app.views.stepper",
    "app.views.timeline_nav",
    "app.views.slices",
    "app.panels.live_range",
    "app.views.measured",
    "app.views.graph_items",
    "app.views.tensor_style",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
