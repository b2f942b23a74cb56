"""``python main.py import-onnx FILE.onnx [-o FILE] [--level op|layer] [--input SHAPE]``.

The ONNX importer (:func:`~solver.importers.onnx_import.import_onnx`) was reachable from Python
only; a user holding an exported ``.onnx`` file needs it from the command line and the window
(which runs this command in a child process, so an import never blocks it and can be stopped).
Same exit statuses and one-line errors as ``import-torch`` (docs/formats.md): 0 on success,
2 for bad input (no such file, not ONNX, onnx missing, bad shape).
"""

from __future__ import annotations

import argparse
import os
import sys

from solver.cli.import_torch import add_platform_arguments, parse_shape, write_imported
from solver.document.atomic import check_writable
from solver.errors import XEngineError, printable
from solver.importers.hardware import make_platform

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Import an ONNX file (a forward graph, e.g. from torch.onnx.export) as a training graph; "
    "the backward is synthesised as for import-torch --capture fx."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The file, its input shape and the platform it is costed on."""
    parser.add_argument("path", metavar="FILE.onnx", help="the ONNX model")
    parser.add_argument(
        "--input",
        type=parse_shape,
        metavar="SHAPE",
        help="shape of the first graph input, e.g. 8x3x224x224 (default: the file's own; "
        "needed when the file leaves the batch size symbolic)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="graph file (default: stdout)")
    parser.add_argument(
        "--level",
        choices=("layer", "op"),
        default="layer",
        help="layer: GEMM-less ops fused into the one before (default); op: one node per op",
    )
    add_platform_arguments(parser)
    parser.add_argument("--name", help="graph name (default: the file's graph name)")


def run(args: argparse.Namespace) -> int:
    """Import the file and write or print its graph; 0, or 2 with one line on stderr."""
    from solver.importers.onnx_import import import_onnx

    try:
        if args.output:
            check_writable(args.output)  # before the import
        platform = make_platform({"cpu": args.cpu, "gpu": args.gpu}, args.link)
        return write_imported(
            lambda: import_onnx(
                args.path, level=args.level, devices=platform, input_shape=args.input,
                name=args.name,
            ),
            args.output,
        )  # fmt: skip
    except XEngineError as exc:  # the output path, the platform's specs
        print(printable(f"error: {exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # the last line of defence: one line, never a traceback
        if os.environ.get("XENGINE_DEBUG"):
            raise
        what = printable(f"{type(exc).__name__}: {exc}")[:300]
        print(
            f"error: {printable(args.path)}: the ONNX importer failed ({what}); please report "
            "it with the file",
            file=sys.stderr,
        )
        return 2
