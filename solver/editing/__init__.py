"""Pure edits of a document: each takes a graph and returns a new one, or raises a one-line error.

:mod:`solver.editing.edits` changes operations and tensors, :mod:`solver.editing.device_edits`
devices and links. The GUI wraps these in undoable commands; they never mutate their input, so
undo is just keeping the old value.
"""
