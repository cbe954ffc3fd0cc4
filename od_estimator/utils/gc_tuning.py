"""Python's garbage collector set for importing and building TensorFlow.

Importing TensorFlow and building a detection graph create millions of
Python objects (modules, ops, tensors, layers, variables) that stay alive.
With Python's defaults (a young collection every 700 new objects, an older
one every 10 of those) the collector walks them again and again: a quarter
of TensorFlow's import, a tenth of a graph's build. `paused` stops it for
an import; `for_graph_building` (the commands call it once their modules
are imported) collects every 10,000 new objects and older generations
rarely, and never walks what was imported again. Cyclic garbage is still
collected, in fewer, larger passes.
"""
import contextlib
import gc

# New objects between young collections (Python's default: 700), young
# collections between middle ones (10), middle between full ones (10).
THRESHOLDS = (10000, 50, 100)


@contextlib.contextmanager
def paused():
  """Context: no collection inside (for an import); as before after."""
  enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if enabled:
      gc.enable()


def for_graph_building():
  """Sets this process's collector for building graphs (see above)."""
  gc.freeze()  # What lives now (the imported modules) is never walked again.
  gc.set_threshold(*THRESHOLDS)
