"""From the original's TF2 checkpoints, our graphs give its detections.

tests/data/tf2_detections/ records what the original's TF2 models output
on tests/seeded_values.image() with every value given by
tests/seeded_values.value (its README says how). Here the same values are
written under the same keys by tests/tf2_checkpoints.py, loaded into our
graph of the same config one of the two ways users do (fine-tuning with
fine_tune_checkpoint_type "full", or the whole-model restore of
evaluation and exports), and our preprocess, predict and postprocess must
give the recorded outputs.

Tolerance: both sides run the same TensorFlow kernels and agree exactly
here. Other kernels (grappler's fusions, or oneDNN off) move our outputs
by up to 1e-4 (FPN-lite's raw boxes; at most 2.5e-5 for the others).
Scaling the variances of a single batch norm by 1.001 moves them by
2.3e-4 to 5e-3, and a feature extractor batch-norm epsilon of 1e-5 instead
of the config's 1e-3 by 2.5e-3 to 0.12: modelling errors (padding,
epsilon, upsampling, anchors, score conversion) are far above TOLERANCE,
rounding below. Detections are compared by (anchor, class), since scores
closer than the rounding may swap places (for Faster R-CNN the anchor is
the proposal each detection refines, its detection_anchor_indices: ours
are the original's). Its ResNet takes
seeded_values.damped_value, which keeps its scores from saturating.
"""
import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.config import config_util
from od_estimator.estimator import fine_tune
from od_estimator.estimator import moving_averages
from od_estimator.protos import train_pb2
from tests import plain_session
from tests import seeded_detections
from tests import seeded_values
from tests import tf2_checkpoints
from tests import upstream_folder

RECORDED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), 'data', 'tf2_detections')
NUM_CLASSES = 3
SIZE = 160  # FPN levels 20, 10, 5, 3 and 2 cells wide: odd sizes pad.
# The changes to each config, for its meta-architecture.
OVERRIDE = ('model { %%s { num_classes: %d image_resizer { '
            'fixed_shape_resizer { height: %d width: %d } } %%s } }' % (
                NUM_CLASSES, SIZE, SIZE))
# And for Faster R-CNN (a third of the box classifier's work).
FASTER_RCNN_OVERRIDE = 'first_stage_max_proposals: 100'

TOLERANCE = 2e-4

Case = collections.namedtuple('Case', ['name', 'prefix', 'graph', 'model',
                                       'detections'])


def _fine_tuned(case):
  """Detections after fine_tune_checkpoint_type "full" initialization."""
  train_config = train_pb2.TrainConfig(
      fine_tune_checkpoint=case.prefix, fine_tune_checkpoint_type='full')
  with case.graph.as_default():
    matched = fine_tune.match_checkpoint(case.model, train_config)
    assert (matched.missing, matched.mismatched, matched.left_out) == (
        [], [], [])
    assert len(matched.available) == len(tf.compat.v1.global_variables())
    tf.compat.v1.train.init_from_checkpoint(case.prefix, matched.available)
    with plain_session.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return sess.run(case.detections)


def _restored(case):
  """Detections after evaluation's and export's whole-model restore."""
  with plain_session.session(case.graph) as sess:
    moving_averages.restore(sess, False, case.prefix)
    return sess.run(case.detections)


def _by_anchor_and_class(detections):
  """{(anchor index, class): (box, score, multiclass scores)}."""
  keys = zip(detections['detection_anchor_indices'][0],
             detections['detection_classes'][0])
  values = zip(detections['detection_boxes'][0],
               detections['detection_scores'][0],
               detections['detection_multiclass_scores'][0])
  return {(int(anchor), int(label)): value
          for (anchor, label), value in zip(keys, values)}


# Config -> how our graph loads its checkpoint, each way for half the
# configs (loading both ways would double the module's time;
# object_checkpoint_checks checks both maps name by name). The two Faster
# R-CNN configs are its two paths: static shapes with the matmul crop and
# one box per proposal, dynamic shapes with the native crop and a box per
# class.
CONFIGS = {'ssd_mobilenet_v2_320x320_coco17_tpu-8': _fine_tuned,
           'ssd_resnet50_v1_fpn_640x640_coco17_tpu-8': _restored,
           'ssd_mobilenet_v2_fpnlite_320x320_coco17_tpu-8': _restored,
           'ssd_mobilenet_v1_fpn_640x640_coco17_tpu-8': _fine_tuned,
           'faster_rcnn_resnet50_v1_640x640_coco17_tpu-8': _restored,
           'faster_rcnn_resnet50_v1_800x1333_coco17_gpu-8': _fine_tuned}


def _value_fn(name):
  """The seeded rule of config `name`: damped for Faster R-CNN's ResNet."""
  if name.startswith('faster_rcnn'):
    return lambda fact: seeded_values.damped_value(fact.key, fact.keras_name,
                                                   fact.shape)
  return lambda fact: seeded_values.value(fact.key, fact.shape)


def _case(name, folder):
  """Config `name`'s TF2 checkpoint of seeded values and our graph."""
  lines = tf2_checkpoints.with_num_classes(
      tf2_checkpoints.model_lines(tf2_checkpoints.facts(name)), NUM_CLASSES)
  prefix = tf2_checkpoints.write(str(folder / name), lines, _value_fn(name))
  path = upstream_folder.config_path(name, tf2=True)
  family = config_util.get_configs_from_pipeline_file(path)[
      'model'].WhichOneof('model')
  model_config = config_util.create_configs_from_pipeline_proto(
      config_util.read_pipeline_config(path, OVERRIDE % (
          family, FASTER_RCNN_OVERRIDE if family == 'faster_rcnn' else '')))[
              'model']
  return Case(name, prefix, *seeded_detections.build(model_config))


@pytest.mark.parametrize('name', list(CONFIGS))
def test_our_detections_are_the_originals(name, tmp_path):
  case = _case(name, tmp_path)
  ours = CONFIGS[name](case)
  with np.load(os.path.join(RECORDED, name + '.npz')) as recorded:
    original = dict(recorded)
  for name in ('raw_detection_boxes', 'raw_detection_scores',
               'detection_scores'):
    np.testing.assert_allclose(ours[name], original[name], rtol=0,
                               atol=TOLERANCE, err_msg=name)
  assert ours['num_detections'] == original['num_detections'] >= 100
  ours, original = _by_anchor_and_class(ours), _by_anchor_and_class(
      original)
  assert ours.keys() == original.keys()
  for key, values in original.items():
    for our_value, value in zip(ours[key], values):
      np.testing.assert_allclose(our_value, value, rtol=0, atol=TOLERANCE,
                                 err_msg=str(key))
