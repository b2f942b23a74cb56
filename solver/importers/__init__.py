"""Importers: PyTorch modules (torch.fx) and ONNX files -> training graphs, with cost models.

torch and onnx are optional extras. Importing this package (or any module in it) never needs
them; the import functions raise :class:`MissingDependencyError` with the install command.

* :func:`import_torch` (``torch_fx``): a ``module:Class`` spec and an input shape -> Graph.
* :func:`import_onnx` (``onnx_import``): a ``.onnx`` file -> the same Graph.
* ``costmodel``: :class:`RooflineCostModel` (published device specs in ``hardware``) and
  :class:`MeasuredCpuCostModel` (per-op times on this CPU with torch).
* ``zoo_models``: VGG16/19, ResNet-18/34/50, U-Net, MobileNetV2, a Transformer block;
  ``zoo`` regenerates the bundled graphs in resources/graphs/.
* ``user_code``: the boundary around the model's own code (any exception or exit -> one line);
  ``torchvision_models``: torchvision's definitions beside the CPU torch wheel; ``corpus``: the
  ecosystem's model builders the importer is tested on.

Running a schedule on torch is not importing: that is :mod:`solver.executors`, which uses this
package (never the other way round).
"""

from __future__ import annotations

from solver.importers._deps import MissingDependencyError
from solver.importers.costmodel import (
    CostModel,
    MeasuredCpuCostModel,
    OpTime,
    RooflineCostModel,
)
from solver.importers.hardware import DEVICES, LINKS, DeviceSpec, LinkSpec, Platform, make_platform
from solver.importers.onnx_import import import_onnx
from solver.importers.torch_fx import import_torch

__all__ = [
    "MissingDependencyError",
    "CostModel",
    "OpTime",
    "RooflineCostModel",
    "MeasuredCpuCostModel",
    "DEVICES",
    "LINKS",
    "DeviceSpec",
    "LinkSpec",
    "Platform",
    "make_platform",
    "import_torch",
    "import_onnx",
]
