"""``python main.py execute MODEL --schedule FILE [...]``.

``MODEL`` is a graph imported from PyTorch (a bundled name such as ``vgg16`` or
``encoder-aten``, or a ``*.graph.json`` file), whose ``meta`` names the model, the input shape,
the level and the importer; or a model spec ``module:Class`` with ``--input SHAPE`` (and
``--capture fx`` for the torch.fx import, or a ``--graph`` that says so). The model is imported
again the same way, the schedule is checked to belong to that import, one training step runs by
the schedule (:mod:`solver.executors.aten_runtime` for ATen imports,
:mod:`solver.executors.fx_runtime` for torch.fx ones) and measured beside predicted time and
peak memory are printed, with whether the gradients equal a plain ``loss.backward()``.
``--export-policy FILE.py`` also writes the selective-checkpointing policy of a one-device
schedule (:mod:`solver.executors.sac_policy`; ATen imports only).

Exit status: 0 the step ran and the gradients match; 1 they do not match; 2 bad input (the
schedule is for another graph, a synthetic graph, an unknown device, torch missing, ...).
Errors are one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from solver.cli.arguments import resolve_graph_path
from solver.cli.import_torch import parse_input, print_error
from solver.document.graph import Graph
from solver.document.graph_io import load_graph
from solver.document.schedule import Schedule
from solver.document.schedule_io import load_schedule
from solver.document.units import format_size
from solver.errors import XEngineError
from solver.importers.aten_capture import inputs_from_meta
from solver.importers.hardware import DEVICES, LINKS, Platform, make_platform
from solver.importers.user_code import user_code

if TYPE_CHECKING:
    from solver.executors.harness import StepReport

__all__ = ["DESCRIPTION", "add_arguments", "parse_device_map", "run", "with_costs"]

DESCRIPTION = "Run one training step of a PyTorch model by a schedule and measure it."


def parse_device_map(text: str) -> dict[str, str]:
    """``"gpu=cuda:0,cpu=cpu"`` -> ``{"gpu": "cuda:0", "cpu": "cpu"}``.

    Examples
    --------
    >>> parse_device_map("gpu=cpu, cpu=cpu")
    {'gpu': 'cpu', 'cpu': 'cpu'}
    """
    result = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, device = part.partition("=")
        if not sep or not name.strip() or not device.strip():
            raise argparse.ArgumentTypeError(
                f"{text!r}: write DEVICE=TORCH_DEVICE pairs joined by commas, e.g. gpu=cpu"
            )
        result[name.strip()] = device.strip()
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The model (or its graph), the schedule, the device map and how to predict."""
    parser.add_argument(
        "spec",
        metavar="MODEL",
        help="an imported graph (bundled name such as vgg16, or FILE.graph.json) whose meta "
        "names the model; or module:Class / path/to/file.py:Class (built with no args)",
    )
    parser.add_argument(
        "--input",
        action="append",
        type=parse_input,
        metavar="SHAPE[:DTYPE]",
        help="input shape with module:Class, as import-torch takes it (4x12:int64 for token "
        "ids; repeat for each argument of forward); default: what the graph's meta says",
    )
    parser.add_argument("--schedule", required=True, metavar="FILE", help="*.schedule.json")
    parser.add_argument("--level", choices=("layer", "op"), default=None)
    parser.add_argument(
        "--capture",
        choices=("aten", "fx"),
        default=None,
        help="how the graph was imported (default: what the graph's meta says, else aten)",
    )
    parser.add_argument(
        "--graph",
        metavar="FILE",
        help="the graph the schedule was solved on (checked against the import; its costs "
        "and devices give the prediction); default: the import itself",
    )
    parser.add_argument(
        "--device-map",
        type=parse_device_map,
        default={},
        metavar="DEV=TORCH,...",
        help="schedule device -> torch device, e.g. gpu=cuda:0,cpu=cpu or gpu=cpu",
    )
    parser.add_argument(
        "--cost",
        choices=("graph", "measured"),
        default="graph",
        help="predict with the graph's costs (default) or with node times measured here "
        "for every device mapped to the CPU",
    )
    parser.add_argument("--cpu", choices=sorted(DEVICES), default="ryzen-9-7950x")
    parser.add_argument("--gpu", choices=sorted(DEVICES), default="rtx-3090")
    parser.add_argument("--link", choices=sorted(LINKS), default="pcie4-x16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--export-policy", metavar="FILE.py", help="write a SAC policy")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error in the model code"
    )


def run(args: argparse.Namespace) -> int:
    """Run the step and print the report; 0 when the gradients match, 1 if not, 2 bad input."""
    try:
        with user_code(args.spec, "running its training step", passing=(OSError,)):
            report, note = _run(args)
    except XEngineError as exc:
        print_error(exc, args.debug)
        return 2
    except OSError as exc:
        print(
            f"error: {getattr(exc, 'filename', '') or ''}: {exc.strerror or exc}", file=sys.stderr
        )
        return 2
    if note:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        _print_report(report)
    return 0 if report.gradients_match else 1


def _run(args: argparse.Namespace) -> tuple[StepReport, str]:
    graph, origin = _given_graph(args)
    spec, shape, level, capture = _model_of(args, graph, origin)
    platform = make_platform({"cpu": args.cpu, "gpu": args.gpu}, args.link)
    if capture == "fx":
        return _run_fx(args, graph, origin, spec, shape, level, platform)
    from solver.executors.aten_runtime import execute_schedule
    from solver.importers.aten import capture_model, graph_from_plan
    from solver.importers.aten_groups import plan_groups
    from solver.importers.profiling import measure_group_times

    plan = plan_groups(capture_model(spec, shape), level)
    graph, schedule, note = _prepared(args, graph, graph_from_plan(plan, platform), origin, spec)
    if args.cost == "measured":
        graph = with_costs(graph, _cpu_mapped(args, graph), measure_group_times(plan))
    report = execute_schedule(plan, graph, schedule, args.device_map, seed=args.seed)
    if args.export_policy:
        from solver.executors.sac_policy import write_policy

        write_policy(args.export_policy, plan, graph, schedule, label=spec)
    return report, note


def _run_fx(
    args: argparse.Namespace,
    graph: Graph | None,
    origin: str,
    spec: str,
    shape: Any,
    level: str,
    platform: Platform,
) -> tuple[StepReport, str]:
    from solver.executors.fx_runtime import execute_fx_schedule, measure_fx_times, plan_fx

    if args.export_policy:
        raise XEngineError(
            f"--export-policy: {spec} runs from its torch.fx import, and the policy is written "
            "for ATen imports; import it with 'main.py import-torch' (default --capture aten), "
            "solve, and execute that graph"
        )
    plan = plan_fx(spec, shape, level, platform)
    graph, schedule, note = _prepared(args, graph, plan.graph, origin, spec)
    if args.cost == "measured":
        graph = with_costs(graph, _cpu_mapped(args, graph), measure_fx_times(plan))
    return execute_fx_schedule(plan, graph, schedule, args.device_map, seed=args.seed), note


def _prepared(
    args: argparse.Namespace, graph: Graph | None, imported: Graph, origin: str, spec: str
) -> tuple[Graph, Schedule, str]:
    """The graph to predict with (the given one, checked against the import), the schedule,
    and a note when the schedule names another graph."""
    if graph is None:
        graph = imported
    elif structure_hash_of(graph) != structure_hash_of(imported):
        raise XEngineError(
            f"{origin}: graph '{graph.name}' ({graph.n} nodes) is not the import of "
            f"{spec} at {_shape_of(args, graph)}, level "
            f"{args.level or graph.meta.get('level', 'layer')} ({imported.n} nodes; "
            f"{_first_difference(graph, imported)}); import it again with the same input "
            "shape and level, and solve on that file"
        )
    schedule = _load_schedule(args.schedule, graph, spec)
    note = ""
    if schedule.graph and schedule.graph != graph.name:
        note = (
            f"{args.schedule} names graph '{schedule.graph}', the import is '{graph.name}'; "
            "its node ids match, so it runs"
        )
    return graph, schedule, note


def structure_hash_of(graph: Graph) -> str:
    from solver.importers.aten import structure_hash

    return structure_hash(graph)


def _shape_of(args: argparse.Namespace, graph: Graph) -> str:
    """The inputs as the command line writes them (``32x3x224x224``, ``4x12:int64 4x8``)."""
    if args.input:
        return " ".join(map(str, args.input))
    if "input_shape" in graph.meta:
        return " ".join(map(str, inputs_from_meta(graph.meta)))
    return "?"


def _cpu_mapped(args: argparse.Namespace, graph: Graph) -> set[str]:
    return {d.name for d in graph.devices if args.device_map.get(d.name, d.name) == "cpu"}


def _given_graph(args: argparse.Namespace) -> tuple[Graph | None, str]:
    """The graph named by MODEL (a bundled name or a graph file) or by ``--graph``."""
    if ":" not in args.spec or args.spec.endswith(".json"):
        path = resolve_graph_path(args.spec)
        if not path.is_file():
            raise XEngineError(
                f"{args.spec}: no such graph file or bundled graph, and not a model spec; "
                "name a graph (vgg16, encoder-aten, FILE.graph.json) or module:Class with "
                "--input SHAPE"
            )
        if args.graph:
            raise XEngineError(
                f"{args.spec} is a graph already; drop --graph {args.graph}, or name the model "
                "(module:Class --input SHAPE) with --graph"
            )
        return load_graph(path), str(args.spec)
    if args.graph:
        return load_graph(args.graph), str(args.graph)
    return None, ""


def _model_of(
    args: argparse.Namespace, graph: Graph | None, origin: str
) -> tuple[str, Any, str, str]:
    """Spec, input shape, level and importer: from the command line, else the graph's meta."""
    meta = graph.meta if graph is not None else {}
    by_graph = ":" not in args.spec or args.spec.endswith(".json")
    if by_graph and not {"source", "input_shape"} <= set(meta):
        raise XEngineError(
            f"{origin}: graph '{graph.name if graph else origin}' is synthetic (its meta names "
            "no model: 'source', 'input_shape'), so there is nothing to run; execute a graph "
            "imported from PyTorch (vgg16, resnet18, encoder-aten, ... or import-torch -o FILE)"
        )
    spec = str(meta["source"]) if by_graph else args.spec
    inputs = tuple(args.input or ()) or (inputs_from_meta(meta) if "input_shape" in meta else ())
    if not inputs:
        raise XEngineError(
            f"{spec}: --input SHAPE is needed with a model spec (e.g. --input 32x3x224x224)"
        )
    level = args.level or str(meta.get("level", "layer"))
    capture = args.capture or (
        "fx" if str(meta.get("importer", "")).startswith("torch.fx") else "aten"
    )
    if capture == "aten":
        return spec, inputs, level, capture
    if len(inputs) != 1 or not inputs[0].is_float:
        raise XEngineError(
            f"{spec}: a torch.fx import takes one float input, not "
            f"{' '.join(map(str, inputs))}; import the model with 'main.py import-torch' "
            "(default --capture aten), solve, and execute that graph"
        )
    return spec, inputs[0].shape, level, capture


def _load_schedule(path: str, graph: Graph, spec: str) -> Schedule:
    from solver.errors import ScheduleFormatError

    try:
        return load_schedule(path, graph)
    except ScheduleFormatError as exc:
        if "unknown node" not in exc.what:
            raise
        raise XEngineError(
            f"{path}: {exc.where}: {exc.what}: the schedule is not for the graph imported from "
            f"{spec} ({graph.n} nodes); solve it on that graph (import-torch ... -o FILE, "
            "then solve FILE)"
        ) from None


def _first_difference(graph: Graph, imported: Graph) -> str:
    for ours, theirs in zip(imported.nodes, graph.nodes, strict=False):
        if (ours.id, ours.memory) != (theirs.id, theirs.memory):
            return f"first difference at node {ours.id!r} vs {theirs.id!r}"
    return "the edges differ" if graph.n == imported.n else "the node counts differ"


def with_costs(graph: Graph, devices: set[str], times: Mapping[str, float]) -> Graph:
    """``graph`` with the node times ``times`` (ms, by node id) as the cost on ``devices``."""
    nodes = tuple(
        replace(n, cost={**n.cost, **{d: float(f"{times[n.id]:.6g}") for d in devices}})
        for n in graph.nodes
    )
    return replace(graph, nodes=nodes)


def _print_report(report: StepReport) -> None:
    print(f"gradients match loss.backward(): {'yes' if report.gradients_match else 'NO'}")
    print(f"  max abs difference {report.max_abs_error:.3g}")
    print(f"time: measured {report.measured_ms:.3f} ms, predicted {report.predicted_ms:.3f} ms")
    for device, peak in report.measured_peak.items():
        predicted = report.predicted_peak.get(device, 0)
        budget = report.budgets.get(device, 0)
        print(
            f"{device} -> {report.device_map[device]}: peak measured {format_size(peak)}, "
            f"predicted {format_size(predicted)}, budget {format_size(budget)}"
        )
    for device, saved in report.measured_saved.items():
        expected = report.predicted_saved.get(device)
        if expected is not None and (saved or expected):
            print(
                f"{device}: saved for the backward measured {format_size(saved)}, "
                f"predicted {format_size(expected)}"
            )
