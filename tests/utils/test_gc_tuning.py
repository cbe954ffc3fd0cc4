"""utils/gc_tuning: the collector paused for an import, set for graphs."""
import gc

from od_estimator.utils import gc_tuning


def test_paused_stops_collecting_inside_and_restores_after():
  assert gc.isenabled()
  with gc_tuning.paused():
    assert not gc.isenabled()
  assert gc.isenabled()
  gc.disable()
  try:
    with gc_tuning.paused():
      pass
    assert not gc.isenabled()  # a collector the caller stopped stays so
  finally:
    gc.enable()


def test_for_graph_building_sets_the_thresholds_and_freezes_the_heap():
  before = gc.get_threshold()
  try:
    gc_tuning.for_graph_building()
    assert gc.get_threshold() == gc_tuning.THRESHOLDS
    assert gc.get_freeze_count() > 0
  finally:
    gc.set_threshold(*before)
