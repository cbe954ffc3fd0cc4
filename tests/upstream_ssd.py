"""The original's SSD sample configs, built and run once on random images.

Shared by tests/test_upstream_ssd_configs.py (the configs built as training
graphs) and tests/test_upstream_ssd_inference_configs.py (the others): the
two halves of one check, in two modules so that pytest-xdist's workers
(each takes a whole module) share the work. Training and inference graphs
alternate between configs, in file name order, to bound the run time.
Each is built at a reduced input size: od_estimator provides every feature
extractor type they name.
"""
import numpy as np
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.core import box_predictor
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.config import config_util
from od_estimator.utils import graph_building
from tests import upstream_folder


def is_ssd(path):
  return config_util.get_configs_from_pipeline_file(path)['model'].WhichOneof(
      'model') == 'ssd'


SSD_CONFIGS = [path for path in upstream_folder.paths() if is_ssd(path)]
REDUCED_SIZE = 128


def is_training(path):
  """Whether the config is built as a training graph (every other one)."""
  return SSD_CONFIGS.index(path) % 2 == 0


def _shrink(ssd_config):
  """Smaller fixed input where the config allows it (anchors follow)."""
  resizer = ssd_config.image_resizer
  kind = resizer.WhichOneof('image_resizer_oneof')
  if ssd_config.feature_extractor.type == 'embedded_ssd_mobilenet_v1':
    return resizer.fixed_shape_resizer.height  # it requires its 256x256
  if kind == 'fixed_shape_resizer':
    size = REDUCED_SIZE
    if ssd_config.feature_extractor.type.startswith(('ssd_resnet',
                                                     'ssd_inception_v3')):
      size = 256  # deeper strides need a larger input for their top levels
    resizer.fixed_shape_resizer.height = size
    resizer.fixed_shape_resizer.width = size
    return size
  return None


def check_builds_and_predicts(path):
  """Builds the config's model, predicts once, checks the output shapes."""
  ssd_config = config_util.get_configs_from_pipeline_file(path)['model'].ssd
  extractor_type = ssd_config.feature_extractor.type
  model_config = config_util.get_configs_from_pipeline_file(path)['model']
  size = _shrink(model_config.ssd)
  assert (extractor_type in
          ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS), path
  with tf.Graph().as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=is_training(path))
    images = tf.random.uniform([1, size or REDUCED_SIZE,
                                size or REDUCED_SIZE, 3], 0, 255)
    preprocessed, true_shapes = model.preprocess(images)
    predictions = model.predict(preprocessed, true_shapes)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      boxes, classes, anchors = sess.run([
          predictions[box_predictor.BOX_ENCODINGS],
          predictions[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND],
          predictions['anchors']])
  num_anchors = anchors.shape[0]
  num_class_slots = model_config.ssd.num_classes + (
      1 if model_config.ssd.add_background_class else 0)
  assert boxes.shape == (1, num_anchors, 4)
  assert classes.shape == (1, num_anchors, num_class_slots)
  assert np.isfinite(boxes).all() and np.isfinite(classes).all()
