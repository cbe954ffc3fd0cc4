"""Checkpoint compatibility with fine-tuning: restore_map end to end.

On the tiny demo model: a classification-only backbone checkpoint, a full
detection checkpoint, and a partial one with missing and shape-mismatched
variables, filtered with variables_helper and loaded with
init_from_checkpoint as model_lib does. The three load into one training
graph built for the module: init_from_checkpoint replaces the initializers
of what it restores, and each test checks only the values it restored. (The original's released zoo
models' variable names and shapes: tests/zoo_checkpoints.py, checked on the
graphs tests/upstream_ssd.py builds.)
"""
import collections
import logging

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.builders import model_builder
from od_estimator.nets import mobilenet_v2
from od_estimator.utils import graph_building
from od_estimator.utils import variables_helper
from tests import tiny_ssd

TINY_SIZE = 64


def _build_tiny_detector(num_classes=3, is_training=True):
  """The tiny demo detector in the default graph, after predict()."""
  model_config = tiny_ssd.model_config(TINY_SIZE)
  model_config.ssd.num_classes = num_classes
  with graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=is_training,
                                add_summaries=False)
    images, true_shapes = model.preprocess(
        tf.zeros([1, TINY_SIZE, TINY_SIZE, 3]))
    model.predict(images, true_shapes)
  return model


def _save_random_values(variables, path):
  """Saves random positive values for the variables under their names, as
  Saver(variables).save() names them; returns the checkpoint prefix.

  One SaveV2 op writes the same V2 checkpoint a Saver writes, without the
  Saver's restore ops for every variable, which nothing here runs.
  """
  rng = np.random.RandomState(7)
  values = [rng.uniform(0.5, 1.5, v.shape.as_list()).astype(
      v.dtype.base_dtype.as_numpy_dtype) for v in variables]
  with tf.Graph().as_default():
    save = tf.raw_ops.SaveV2(
        prefix=path, tensor_names=[v.op.name for v in variables],
        shape_and_slices=[''] * len(variables), tensors=values)
    with tf.compat.v1.Session() as sess:
      sess.run(save)
  return path


def _fine_tune(model, checkpoint, checkpoint_type, load_all=False):
  """restore_map, filtered and loaded as model_lib does.

  Returns:
    (restore map, available, missing, mismatched, {checkpoint name: value
    after initialization}).
  """
  wanted = model.restore_map(fine_tune_checkpoint_type=checkpoint_type,
                             load_all_detection_checkpoint_vars=load_all)
  available, missing, mismatched = (
      variables_helper.get_variables_available_in_checkpoint_with_report(
          wanted, checkpoint, include_global_step=False))
  tf.compat.v1.train.init_from_checkpoint(checkpoint, available)
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    values = sess.run(wanted)
  return wanted, available, missing, mismatched, values


def _assert_restored(values, names, checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  for name in names:
    np.testing.assert_array_equal(values[name], reader.get_tensor(name),
                                  err_msg=name)


@pytest.fixture(scope='module')
def classification_checkpoint(tmp_path_factory):
  """MobileNet v2 x0.25 alone under 'MobilenetV2', with a 1001-way head.

  Laid out as slim's classification checkpoints: no 'FeatureExtractor/'
  prefix, logits the detector lacks, a global step.
  """
  path = str(tmp_path_factory.mktemp('classification') / 'model.ckpt')
  with tf.Graph().as_default(), graph_building.identity_equality():
    images = tf.zeros([1, TINY_SIZE, TINY_SIZE, 3])
    with slim.arg_scope(mobilenet_v2.training_scope(is_training=False)):
      net, _ = mobilenet_v2.mobilenet_base(images, depth_multiplier=0.25,
                                           scope='MobilenetV2')
      slim.conv2d(net, 1001, [1, 1], activation_fn=None, normalizer_fn=None,
                  scope='MobilenetV2/Logits/Conv2d_1c_1x1')
    tf.compat.v1.train.get_or_create_global_step()
    return _save_random_values(tf.compat.v1.global_variables(), path)


Detector = collections.namedtuple('Detector', ['graph', 'model',
                                               'detection_checkpoint'])


@pytest.fixture(scope='module')
def detector(tmp_path_factory):
  """The tiny detector's training graph (3 classes, a global step), and a
  checkpoint of every variable of it, written before any test loads one."""
  path = str(tmp_path_factory.mktemp('detection') / 'model.ckpt')
  graph = tf.Graph()
  with graph.as_default():
    model = _build_tiny_detector()
    tf.compat.v1.train.get_or_create_global_step()
    checkpoint = _save_random_values(tf.compat.v1.global_variables(), path)
  return Detector(graph, model, checkpoint)


def test_classification_checkpoint_restores_the_backbone(
    classification_checkpoint, detector):
  with detector.graph.as_default():
    wanted, available, missing, mismatched, values = _fine_tune(
        detector.model, classification_checkpoint, 'classification')
  # Checkpoint names: the detector's backbone without 'FeatureExtractor/'.
  assert all(name.startswith('MobilenetV2/') for name in wanted)
  assert wanted['MobilenetV2/Conv/weights'].op.name == (
      'FeatureExtractor/MobilenetV2/Conv/weights')
  assert not any(name.startswith('BoxPredictor') for name in wanted)
  # Only the SSD layers added after layer_19 are new; no shape differs.
  assert missing == sorted(name for name in wanted if '/layer_19_' in name)
  assert len(missing) == 60  # 4 layers x 3 convs x (weights + 4 BN)
  assert mismatched == []
  assert len(available) == 260  # the whole MobileNet v2 trunk
  _assert_restored(values, available, classification_checkpoint)


def test_detection_checkpoint_restores_fully(detector):
  checkpoint = detector.detection_checkpoint
  with detector.graph.as_default():
    # By default only the feature extractor is taken from a detector.
    extractor_map = detector.model.restore_map('detection')
    wanted, available, missing, mismatched, values = _fine_tune(
        detector.model, checkpoint, 'detection', load_all=True)
  model_names = set(wanted) - {'global_step'}
  assert set(extractor_map) == {name for name in model_names
                                if name.startswith('FeatureExtractor/')}
  assert any(name.startswith('BoxPredictor_') for name in model_names)
  assert (missing, mismatched) == ([], [])
  assert set(available) == model_names
  _assert_restored(values, model_names, checkpoint)


@pytest.fixture(scope='module')
def partial_checkpoint(tmp_path_factory):
  """A 2-class detector's variables, the last SSD layer's left out.

  Returns:
    (checkpoint prefix, sorted names left out).
  """
  path = str(tmp_path_factory.mktemp('partial') / 'model.ckpt')
  with tf.Graph().as_default():
    _build_tiny_detector(num_classes=2, is_training=False)
    variables = tf.compat.v1.global_variables()
    left_out = sorted(v.op.name for v in variables
                      if '/layer_19_2_Conv2d_5_' in v.op.name)
    kept = [v for v in variables if v.op.name not in left_out]
    return _save_random_values(kept, path), left_out


def test_partial_checkpoint_restores_the_rest_and_reports_skipped(
    partial_checkpoint, detector, caplog):
  checkpoint, left_out = partial_checkpoint
  assert len(left_out) == 10  # depthwise and pointwise conv, with BN
  with detector.graph.as_default():
    model = detector.model
    wanted = model.restore_map('detection',
                               load_all_detection_checkpoint_vars=True)
    # Unfiltered, the checkpoint cannot initialize this model.
    with pytest.raises(ValueError):
      tf.compat.v1.train.init_from_checkpoint(checkpoint, wanted)
    with caplog.at_level(logging.WARNING):
      variables_helper.get_variables_available_in_checkpoint(
          wanted, checkpoint)
    _, available, missing, mismatched, values = _fine_tune(
        model, checkpoint, 'detection', load_all=True)
  assert missing == left_out
  # Class heads: anchors x (2 + 1) in the checkpoint, x (3 + 1) here.
  num_maps = 6
  assert [entry[0] for entry in mismatched] == sorted(
      'BoxPredictor_%d/ClassPredictor/%s' % (index, kind)
      for index in range(num_maps) for kind in ('biases', 'weights'))
  for _, checkpoint_shape, model_shape in mismatched:
    assert checkpoint_shape[:-1] == model_shape[:-1]
    assert checkpoint_shape[-1] // 3 == model_shape[-1] // 4
  skipped = set(missing) | {entry[0] for entry in mismatched}
  # Neither restored nor reported: the global step (include_global_step).
  assert set(available) == set(wanted) - skipped - {'global_step'}
  _assert_restored(values, available, checkpoint)
  # One warning names what was skipped and why.
  warning = '\n'.join(r.getMessage() for r in caplog.records
                      if r.levelno == logging.WARNING)
  assert 'Restoring %d of %d' % (len(available), len(wanted)) in warning
  assert left_out[0] in warning
  assert 'BoxPredictor_0/ClassPredictor/biases [9] vs [12]' in warning
