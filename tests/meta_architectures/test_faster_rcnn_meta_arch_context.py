"""Context R-CNN: FasterRCNNMetaArch whose box classifier attends to context.

The tiny parts of faster_rcnn_parts (32x32 images, a 2x2 first-stage map of
depth 8, 4x4 ROI crops) with context features of CONTEXT_LENGTH per row,
given to predict as side inputs, as the model_fn takes them out of the
input features (get_side_inputs).
"""
import functools

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import image_resizing
from od_estimator.core import standard_fields as fields
from od_estimator.meta_architectures import context_rcnn_lib
from od_estimator.meta_architectures import faster_rcnn_meta_arch as arch
from tests import fakes
from tests.meta_architectures import faster_rcnn_parts as parts

BATCH = 2
CONTEXT_SIZE = 5
CONTEXT_LENGTH = 6
VALID_SIZES = [2, 5]
CONTEXT = context_rcnn_lib.ContextParams(
    bottleneck_dimension=4, temperature=0.1,
    context_feature_length=CONTEXT_LENGTH)
_IN = fields.InputDataFields
GT_BOXES = [[[0.0, 0.0, 0.5, 0.5]], [[0.5, 0.5, 1.0, 1.0]]]
GT_CLASSES = [[[1.0, 0.0]], [[0.0, 1.0]]]


def _build_model(is_training, context=CONTEXT):
  classifier, _ = parts.second_stage_parts(is_training, context=context)
  return arch.FasterRCNNMetaArch(
      is_training,
      fakes.FakeFasterRCNNFeatureExtractor(is_training,
                                           first_stage_features_stride=16),
      arch.ModelParams(
          num_classes=parts.NUM_CLASSES,
          image_resizer_fn=functools.partial(
              image_resizing.resize_image, new_height=parts.IMAGE_SIZE,
              new_width=parts.IMAGE_SIZE)),
      parts.rpn(is_training), classifier)


def _context_features(seed):
  return np.random.RandomState(seed).uniform(
      -1.0, 1.0, [BATCH, CONTEXT_SIZE, CONTEXT_LENGTH]).astype(np.float32)


def _features(context_features):
  """The input function's features (more than the model's side inputs)."""
  return {
      _IN.image: tf.constant(np.random.RandomState(0).uniform(
          0, 255, [BATCH, parts.IMAGE_SIZE, parts.IMAGE_SIZE, 3]),
                             tf.float32),
      _IN.context_features: context_features,
      _IN.valid_context_size: tf.constant(VALID_SIZES),
  }


def test_predict_and_loss_train_the_attention():
  with tf.Graph().as_default():
    model = _build_model(is_training=True)
    features = _features(tf.constant(_context_features(1)))
    side_inputs = model.get_side_inputs(features)
    assert sorted(side_inputs) == [_IN.context_features,
                                   _IN.valid_context_size]
    model.provide_groundtruth([tf.constant(boxes) for boxes in GT_BOXES],
                              [tf.constant(classes) for classes in GT_CLASSES])
    preprocessed, true_shapes = model.preprocess(features[_IN.image])
    predictions = model.predict(preprocessed, true_shapes, **side_inputs)
    losses = model.loss(predictions, true_shapes)
    attention_variables = [
        variable for variable in tf.compat.v1.trainable_variables()
        if variable.op.name.startswith(('AttentionBlock/', 'fully_connected/'))]
    # Three projections in the block and the output one: weights, beta,
    # gamma each.
    assert len(attention_variables) == 12
    gradients = tf.gradients(tf.add_n(list(losses.values())),
                             attention_variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      loss_values, gradient_values = session.run((losses, gradients))
  assert sorted(loss_values) == [
      'Loss/BoxClassifierLoss/classification_loss',
      'Loss/BoxClassifierLoss/localization_loss',
      'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss']
  assert all(np.isfinite(value) for value in loss_values.values())
  assert any(np.abs(gradient).max() > 0 for gradient in gradient_values)


def test_only_valid_context_rows_change_the_predictions():
  with tf.Graph().as_default():
    model = _build_model(is_training=False)
    context_features = tf.compat.v1.placeholder(
        tf.float32, [BATCH, CONTEXT_SIZE, CONTEXT_LENGTH])
    features = _features(context_features)
    preprocessed, true_shapes = model.preprocess(features[_IN.image])
    predictions = model.predict(preprocessed, true_shapes,
                                **model.get_side_inputs(features))
    detections = model.postprocess(predictions, true_shapes)
    outputs = (predictions['class_predictions_with_background'],
               detections['detection_scores'])
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      original = _context_features(1)
      padding_changed = original.copy()
      padding_changed[0, VALID_SIZES[0]:] = _context_features(2)[
          0, VALID_SIZES[0]:]
      valid_changed = original.copy()
      valid_changed[0, :VALID_SIZES[0]] = _context_features(3)[
          0, :VALID_SIZES[0]]
      first, second, third = (
          session.run(outputs, {context_features: value})
          for value in (original, padding_changed, valid_changed))
  for before, after in zip(first, second):
    np.testing.assert_allclose(before, after, rtol=1e-5, atol=1e-6)
  assert not np.allclose(first[0], third[0], atol=1e-5)


def test_side_inputs_are_required_by_context_rcnn_only():
  with tf.Graph().as_default():
    context_model = _build_model(is_training=False)
    plain_model = _build_model(is_training=False, context=None)
    features = _features(tf.constant(_context_features(1)))
    assert plain_model.get_side_inputs(features) == {}
    with pytest.raises(ValueError, match='load_context_features'):
      context_model.get_side_inputs({_IN.image: features[_IN.image]})
    preprocessed, true_shapes = plain_model.preprocess(features[_IN.image])
    with pytest.raises(ValueError, match='side inputs'):
      context_model.predict(preprocessed, true_shapes)
    with pytest.raises(ValueError, match='side inputs'):
      plain_model.predict(preprocessed, true_shapes,
                          **context_model.get_side_inputs(features))


def test_context_rcnn_has_no_mask_branch():
  classifier, branch = parts.second_stage_parts(
      with_masks=True, context=CONTEXT)
  with pytest.raises(ValueError, match='mask branch'):
    arch.FasterRCNNMetaArch(
        True, fakes.FakeFasterRCNNFeatureExtractor(True, 16),
        arch.ModelParams(num_classes=parts.NUM_CLASSES,
                         image_resizer_fn=None, number_of_stages=3),
        parts.rpn(True), classifier, branch)
