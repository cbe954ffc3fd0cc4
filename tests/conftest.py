"""Shared pytest fixtures: run graph-mode TF code and get numpy results.

The original's sample configs (test data this repository does not ship):
take the `upstream_configs` fixture (or `upstream_configs_tf2` for the
TF2-era ones), the folder's path; the test skips with one reason line when
the folder is absent. It is $OD_UPSTREAM_CONFIGS (or
$OD_UPSTREAM_CONFIGS_TF2), else ../shared/upstream_configs(_tf2) next to
the repository. To parametrize over every config of the folder, use
`@pytest.mark.parametrize('path', upstream_folder.params())` of
tests/upstream_folder.py; never a fixed list of names.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import trained_models
from tests import upstream_folder

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

# The tiny models trained and exported once per run (tests/trained_models.py).
one_step_tiny_ssd = trained_models.one_step_tiny_ssd
one_step_tiny_ssd_export = trained_models.one_step_tiny_ssd_export
overfit_faster_rcnn = trained_models.overfit_faster_rcnn
overfit_mask_rcnn = trained_models.overfit_mask_rcnn

# The modules that take longest (trained models, subprocesses, clusters),
# slowest first. `make test` runs `-n 2 --dist loadscope
# --no-loadscope-reorder`: each module goes whole to the next free worker in
# collection order, so these start first and the two workers finish
# together. (xdist's default order, most tests first, starts these
# few-test modules last, and one worker then runs them alone.)
SLOWEST_MODULES = (
    'tests/test_upstream_ssd_configs.py',
    'tests/test_training_robustness.py',
    'tests/test_cluster.py',
    'tests/estimator/test_preemption.py',
    'tests/test_export_vs_estimator.py',
    'tests/test_evaluation_signals.py',
    'tests/test_export_safety.py',
    'tests/estimator/test_fine_tune.py',
    'tests/test_mirrored_strategy.py',
    'tests/test_data_errors.py',
    'tests/test_upstream_faster_rcnn_configs.py',
    'tests/test_model_main.py',
    'tests/test_faster_rcnn_end_to_end.py',
    'tests/test_mask_rcnn_end_to_end.py',
    'tests/models/test_faster_rcnn_resnet_v1_feature_extractor.py',
    'tests/models/test_faster_rcnn_inception_resnet_v2_feature_extractor.py',
    'tests/test_model_tpu_main.py',
    'tests/test_model_dir_mismatch.py',
    'tests/test_freeze_variables.py',
    'tests/legacy/test_legacy_commands.py',
)


def pytest_collection_modifyitems(items):
  """Puts SLOWEST_MODULES first, in that order; the rest keep theirs."""
  rank = {path: index for index, path in enumerate(SLOWEST_MODULES)}
  items.sort(key=lambda item: rank.get(item.nodeid.split('::', 1)[0],
                                       len(rank)))


def _execute(graph_fn, inputs=(), dynamic=False):
  """Builds `graph_fn(*tensors)` in a fresh graph and runs it once.

  Args:
    graph_fn: function of tensors returning a tensor or a nested structure
      of tensors.
    inputs: numpy arrays fed as the function's arguments.
    dynamic: when True the inputs are placeholders with unknown dimensions,
      to exercise the code's dynamic-shape path; otherwise constants.

  Returns:
    graph_fn's outputs evaluated to numpy, with the same structure.
  """
  with tf.Graph().as_default() as graph:
    feed = {}
    tensors = []
    for value in inputs:
      value = np.asarray(value)
      if dynamic:
        placeholder = tf.compat.v1.placeholder(
            tf.as_dtype(value.dtype), shape=[None] * value.ndim)
        feed[placeholder] = value
        tensors.append(placeholder)
      else:
        tensors.append(tf.constant(value))
    outputs = graph_fn(*tensors)
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      return sess.run(outputs, feed_dict=feed)


@pytest.fixture
def execute():
  """`execute(graph_fn, inputs, dynamic=False)`: see _execute."""
  return _execute


@pytest.fixture
def upstream_configs():
  """The folder of the original's TF1 sample configs; skips when absent."""
  return upstream_folder.require()


@pytest.fixture
def upstream_configs_tf2():
  """The folder of the original's TF2-era sample configs; skips if absent."""
  return upstream_folder.require(tf2=True)
