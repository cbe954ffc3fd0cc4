"""Context R-CNN's attention of proposals into a bank of context features.

Beery et al., "Context R-CNN: Long Term Temporal Context for Per-Camera
Object Detection", CVPR 2020. Each proposal's ROI crop, averaged over its
height and width, asks a question (query) of the context features of other
frames from the same camera (keys and values); the answer, projected back
to the crop's depth, is added to every cell of the crop before the max pool
and the second stage of the feature extractor.

Every projection is a fully connected layer without bias, batch norm
(decay 0.97, epsilon 0.001, centred and scaled) and ReLU6; queries, keys
and values are L2-normalized, so their dot products are cosines, sharpened
by the softmax temperature. Context rows at or beyond valid_context_size
are padding: their logits get -100000 before the temperature and their
values are zeroed, so at inference they change nothing. (In training their
projections still enter the batch norm statistics of the keys and values,
as in the original.)

Variable names are the original's TF1 ones (the zoo's
context_rcnn_resnet101_snapshot_serengeti checkpoint): the query, key and
value projections AttentionBlock/fully_connected, _1 and _2, and the output
projection fully_connected, in the scope the attention is built in.
"""
import dataclasses

import tensorflow as tf
import tf_slim as slim

from od_estimator.core import shape_utils

ATTENTION_BLOCK_SCOPE = 'AttentionBlock'
# Projection scopes: queries, keys, values inside ATTENTION_BLOCK_SCOPE, and
# the output projection outside it (the original's slim default names).
QUERY_SCOPE = 'fully_connected'
KEY_SCOPE = 'fully_connected_1'
VALUE_SCOPE = 'fully_connected_2'
OUTPUT_SCOPE = 'fully_connected'
# Added to the logits of padded context rows (before the temperature).
_NEGATIVE_PADDING_VALUE = -100000.0
_BATCH_NORM_DECAY = 0.97
_BATCH_NORM_EPSILON = 0.001


@dataclasses.dataclass(frozen=True)
class ContextParams:
  """Settings of the attention (model.faster_rcnn.context_config).

  Attributes:
    bottleneck_dimension: depth of queries, keys and values.
    temperature: softmax temperature of the attention weights.
    context_feature_length: depth of each context feature.
  """
  bottleneck_dimension: int
  temperature: float
  context_feature_length: int


def compute_valid_mask(num_valid_elements, num_elements):
  """[batch, num_elements] bool, True for the first num_valid_elements.

  Args:
    num_valid_elements: [batch] int32.
    num_elements: int or int32 scalar.
  """
  return tf.sequence_mask(num_valid_elements, num_elements)


def filter_weight_value(weights, values, valid_mask):
  """Takes the padded context rows out of the attention.

  Args:
    weights: [batch, input_size, context_size] float32 attention logits.
    values: [batch, context_size, depth] float32.
    valid_mask: [batch, context_size] bool.

  Returns:
    weights with _NEGATIVE_PADDING_VALUE added to the padded rows' logits,
    values with the padded rows zeroed.
  """
  valid = tf.cast(valid_mask, weights.dtype)
  weights += (1.0 - valid[:, tf.newaxis, :]) * _NEGATIVE_PADDING_VALUE
  return weights, values * valid[:, :, tf.newaxis]


def project_features(features, projection_dimension, is_training, normalize,
                     scope=None):
  """Fully connected, batch norm and ReLU6 on every row.

  Args:
    features: [batch, rows, depth] float32, depth static.
    projection_dimension: output depth.
    is_training: batch norm in training mode.
    normalize: L2-normalize the output rows.
    scope: the layer's variable scope, reused when it exists; None: slim's
      next default name (fully_connected, fully_connected_1, ...).

  Returns:
    [batch, rows, projection_dimension] float32.
  """
  batch_size = shape_utils.combined_static_and_dynamic_shape(features)[0]
  projected = slim.fully_connected(
      tf.reshape(features, [-1, features.shape[-1]]), projection_dimension,
      activation_fn=tf.nn.relu6, normalizer_fn=slim.batch_norm,
      normalizer_params={'is_training': is_training,
                         'decay': _BATCH_NORM_DECAY,
                         'epsilon': _BATCH_NORM_EPSILON,
                         'center': True, 'scale': True,
                         # tf-slim's fused path, which it takes for rank-2
                         # inputs, fails on TF 2.15; the other computes the
                         # same with the same variables.
                         'fused': False},
      reuse=tf.compat.v1.AUTO_REUSE if scope else None, scope=scope)
  projected = tf.reshape(projected, [batch_size, -1, projection_dimension])
  if normalize:
    projected = tf.math.l2_normalize(projected, axis=-1)
  return projected


def attention_block(input_features, context_features, bottleneck_dimension,
                    output_dimension, attention_temperature, valid_mask,
                    is_training):
  """Softmax attention of input rows into the valid context rows.

  Args:
    input_features: [batch, rows, depth] float32 (queries' input).
    context_features: [batch, context_size, context_depth] float32 (keys'
      and values' input).
    bottleneck_dimension: depth of queries, keys and values.
    output_dimension: depth of the output.
    attention_temperature: softmax temperature: weights are
      softmax(logits / attention_temperature).
    valid_mask: [batch, context_size] bool, False for padding rows.
    is_training: batch norm in training mode.

  Returns:
    [batch, rows, output_dimension] float32.
  """
  with tf.compat.v1.variable_scope(ATTENTION_BLOCK_SCOPE,
                                   reuse=tf.compat.v1.AUTO_REUSE):
    queries = project_features(input_features, bottleneck_dimension,
                               is_training, True, QUERY_SCOPE)
    keys = project_features(context_features, bottleneck_dimension,
                            is_training, True, KEY_SCOPE)
    values = project_features(context_features, bottleneck_dimension,
                              is_training, True, VALUE_SCOPE)
  weights, values = filter_weight_value(
      tf.matmul(queries, keys, transpose_b=True), values, valid_mask)
  weights = tf.nn.softmax(weights / attention_temperature)
  return project_features(tf.matmul(weights, values), output_dimension,
                          is_training, False, OUTPUT_SCOPE)


def compute_box_context_attention(box_features, context_features,
                                  valid_context_size, bottleneck_dimension,
                                  attention_temperature, is_training):
  """Attention features of each proposal's crop, to add to the crop.

  Args:
    box_features: [batch, num_proposals, height, width, channels] float32
      ROI crops (channels static).
    context_features: [batch, context_size, context_depth] float32, zero
      padded (context_depth static).
    valid_context_size: [batch] int32 number of real context rows.
    bottleneck_dimension: depth of queries, keys and values.
    attention_temperature: softmax temperature.
    is_training: batch norm in training mode.

  Returns:
    [batch, num_proposals, 1, 1, channels] float32.
  """
  valid_mask = compute_valid_mask(
      valid_context_size,
      shape_utils.combined_static_and_dynamic_shape(context_features)[1])
  attention = attention_block(
      tf.reduce_mean(box_features, axis=[2, 3]), context_features,
      bottleneck_dimension, box_features.shape[-1], attention_temperature,
      valid_mask, is_training)
  return attention[:, :, tf.newaxis, tf.newaxis, :]


def box_context_attention(box_features, context_features, valid_context_size,
                          params, is_training):
  """compute_box_context_attention with ContextParams.

  Args:
    box_features: as compute_box_context_attention takes them.
    context_features: [batch, max_num_context_features,
      context_feature_length] float32, zero padded.
    valid_context_size: [batch] int32.
    params: ContextParams.
    is_training: batch norm in training mode.

  Returns:
    [batch, num_proposals, 1, 1, channels] float32.

  Raises:
    ValueError (when built) or tf.errors.InvalidArgumentError (when run):
      context features whose depth is not params.context_feature_length.
  """
  context_features = tf.ensure_shape(
      tf.cast(context_features, box_features.dtype),
      [None, None, params.context_feature_length])
  return compute_box_context_attention(
      box_features, context_features, valid_context_size,
      params.bottleneck_dimension, params.temperature, is_training)
