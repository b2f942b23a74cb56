"""The document: what a user opens, edits and saves.

The graph model (:mod:`solver.document.graph`: operations, tensors, devices, links), schedules
(:mod:`solver.document.schedule`), sizes and units, training-graph construction, the file formats
(:mod:`solver.document.graph_io`, :mod:`solver.document.schedule_io`) with safe JSON
(:mod:`solver.document.json_io`), atomic saving (:mod:`solver.document.atomic`) and CSV cells
(:mod:`solver.document.csvsafe`), and the bundled and generated graphs
(:mod:`solver.document.examples`, :mod:`solver.document.generators`). Everything here is data and
its validation: nothing replays a schedule or runs a solver, so every other package may import
from here, and this package imports none of them (the teaching graphs, sized by the lower
bounds, are :mod:`solver.optimize.teaching`).
"""
