"""od_estimator: the TF1 Object Detection API's Estimator path, maintained."""
import importlib
import importlib.util
import sys

from od_estimator.utils import gc_tuning
from od_estimator.utils import quiet_output


def _alias_legacy_batch_norm():
  """Lets tf-slim's batch_norm run on TensorFlow 2.15.

  TF 2.15's tensorflow/python/layers/normalization.py lazily imports
  `tf_keras.legacy_tf_layers.normalization`, a module no released tf-keras
  provides; the same layers ship with TF's own Keras 2 as
  `keras.src.legacy_tf_layers.normalization`. Register that under the name
  TF asks for, unless a real one exists.
  """
  name = 'tf_keras.legacy_tf_layers.normalization'
  if name in sys.modules or importlib.util.find_spec('tf_keras') and \
      importlib.util.find_spec('tf_keras.legacy_tf_layers'):
    return
  sys.modules[name] = importlib.import_module(
      'keras.src.legacy_tf_layers.normalization')


# TensorFlow is imported here: without collecting (utils/gc_tuning.py), its
# C++ startup lines hidden unless asked for (utils/quiet_output.py).
quiet_output.before_tensorflow()
with gc_tuning.paused():
  _alias_legacy_batch_norm()
