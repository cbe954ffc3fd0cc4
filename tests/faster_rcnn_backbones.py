"""Builds a Faster R-CNN backbone's two stages once for a test module.

Graphs of the full-size backbones take seconds to build and initialise, so
each test module builds one `Backbone` in a module-scoped fixture and its
tests share it: shapes, variables, the restore map and a few training steps.
"""
import collections
import dataclasses

import numpy as np
import tensorflow as tf

from od_estimator.models import faster_rcnn_feature_extractor as base
from tests import fast_graphs
from tests import plain_session

FIRST = base.FIRST_STAGE_SCOPE
SECOND = base.SECOND_STAGE_SCOPE


@dataclasses.dataclass
class Backbone:
  """A built two-stage backbone and what tests read from it."""
  graph: tf.Graph
  extractor: base.FasterRCNNFeatureExtractor
  rpn_feature_map: tf.Tensor
  activations: dict
  box_classifier_features: tf.Tensor
  crop_features: tf.Tensor  # None when built without crops.
  variables: dict
  losses: list

  def names(self, scope):
    """{name without `scope/`: shape list} of the stage's variables."""
    prefix = scope + '/'
    return {name[len(prefix):]: shape for name, shape in self.variables.items()
            if name.startswith(prefix)}


def _both_stages(extractor, images):
  """(proposal feature map, its activations, second-stage features)."""
  rpn_feature_map, activations = extractor.extract_proposal_features(
      extractor.preprocess(images), scope=FIRST)
  features = extractor.extract_box_classifier_features(
      rpn_feature_map, scope=SECOND)
  return rpn_feature_map, activations, features


def build(extractor, crop_shape=None, image_size=64, train_steps=3,
          learning_rate=1e-3):
  """Builds both stages on a random image, then trains a few steps.

  The second stage runs on the proposal map itself (what the toy loss
  reads, so gradients cross both stages) and, given `crop_shape`, again
  with shared weights on zero crops of that shape (the size the sample
  configs crop to), whose static output shape the tests check.

  The toy loss is log(mean(squared second-stage features)): its gradient
  does not depend on the scale of the activations, which randomly
  initialised deep networks with frozen batch norm blow up.

  Args:
    extractor: a FasterRCNNFeatureExtractor.
    crop_shape: [num_proposals, height, width, depth] of the crops, or
      None.
    image_size: side of the square input image.
    train_steps: gradient descent steps to run.
    learning_rate: their learning rate.

  Returns:
    a Backbone whose `losses` are the loss before each step and after the
    last.
  """
  with fast_graphs.new_graph() as graph:
    tf.compat.v1.set_random_seed(1)
    images = tf.constant(np.random.RandomState(0).uniform(
        0, 255, [1, image_size, image_size, 3]).astype(np.float32))
    rpn_feature_map, activations, features = _both_stages(extractor, images)
    crop_features = None
    if crop_shape:
      crop_features = extractor.extract_box_classifier_features(
          tf.zeros(crop_shape), scope=SECOND)
    loss = tf.math.log(tf.reduce_mean(tf.square(features)))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(
        learning_rate).minimize(loss)
    variables = {v.op.name: v.shape.as_list()
                 for v in tf.compat.v1.global_variables()}
    with plain_session.session(graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      losses = [sess.run([loss, train_op])[0] for _ in range(train_steps)]
      losses.append(sess.run(loss))
  return Backbone(graph, extractor, rpn_feature_map, activations, features,
                  crop_features, variables, losses)


def first_stage_shape(extractor, image_size=64):
  """Static shape of the proposal features of a [1, size, size, 3] image."""
  with fast_graphs.new_graph():
    images = tf.zeros([1, image_size, image_size, 3])
    rpn_feature_map, _ = extractor.extract_proposal_features(
        extractor.preprocess(images), scope=FIRST)
    return rpn_feature_map.shape.as_list()


SecondStage = collections.namedtuple(
    'SecondStage', ['shape', 'update_ops', 'regularization_losses'])


def second_stage_alone(extractor, crop_shape):
  """Builds the second stage alone on zero crops (cheap: few layers).

  Returns:
    SecondStage: the output's static shape, the number of UPDATE_OPS and
    the number of regularization losses.
  """
  with fast_graphs.new_graph() as graph:
    features = extractor.extract_box_classifier_features(
        tf.zeros(crop_shape), scope=SECOND)
    return SecondStage(
        features.shape.as_list(),
        len(graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)),
        len(tf.compat.v1.losses.get_regularization_losses()))


def update_ops(backbone):
  """The UPDATE_OPS collection of a built backbone's graph."""
  return backbone.graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)


def restore_map(backbone):
  """The extractor's classification restore map, as {name: variable name}."""
  with backbone.graph.as_default():
    restore = backbone.extractor.restore_from_classification_checkpoint_fn(
        FIRST, SECOND)
  return {name: variable.op.name for name, variable in restore.items()}
