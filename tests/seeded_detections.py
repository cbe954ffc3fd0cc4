"""Our inference graph of a model config on tests/seeded_values.image().

The graph tests/data/tf2_detections/ compares with the original's: the
model built for inference, then preprocess, predict and postprocess of the
image as a float32 batch of one.
"""
import numpy as np
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.utils import graph_building
from tests import seeded_values


def build(model_config):
  """(graph, model, detections dict of tensors) of model_config."""
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=False)
    images = tf.constant(seeded_values.image()[np.newaxis], tf.float32)
    preprocessed, true_image_shapes = model.preprocess(images)
    detections = model.postprocess(
        model.predict(preprocessed, true_image_shapes), true_image_shapes)
  return graph, model, detections
