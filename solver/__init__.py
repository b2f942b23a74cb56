"""XEngine Studio's headless core: graphs, schedules, the simulator and the MIQP solver.

Nothing in this package imports Qt; the GUI in ``app/`` is a thin layer over it.

The Python API (:mod:`solver.api`) is here too, loaded when first used (``import solver``
stays light and needs no torch):

* :func:`import_model` (an ``nn.Module`` and example inputs -> :class:`ImportedModel`);
* :meth:`ImportedModel.solve` (memory limits such as ``gpu="60%"`` or ``"8GiB"`` -> :class:`Plan`);
* :meth:`Plan.summary`, :meth:`Plan.execute`, :meth:`Plan.export_policy`,
  :meth:`Plan.train_step` and :meth:`Plan.single_device`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ImportedModel", "Plan", "import_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from solver import api

        return getattr(api, name)
    raise AttributeError(f"module 'solver' has no attribute {name!r}")
