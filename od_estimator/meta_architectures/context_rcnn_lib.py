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


def project_features(features, depth, is_training, normalize, scope):
  """Fully connected, batch norm and ReLU6 on every row.

  Args:
    features: [batch, rows, in_depth] float32, in_depth static.
    depth: output depth.
    is_training: batch norm in training mode.
    normalize: L2-normalize the output rows.
    scope: the layer's variable scope.

  Returns:
    [batch, rows, depth] float32.
  """
  batch_size = shape_utils.combined_static_and_dynamic_shape(features)[0]
  projected = slim.fully_connected(
      tf.reshape(features, [-1, features.shape[-1]]), depth,
      activation_fn=tf.nn.relu6, normalizer_fn=slim.batch_norm,
      normalizer_params={'is_training': is_training,
                         'decay': _BATCH_NORM_DECAY,
                         'epsilon': _BATCH_NORM_EPSILON,
                         'center': True, 'scale': True,
                         # tf-slim's fused path, which it takes for rank-2
                         # inputs, fails on TF 2.15; the other computes the
                         # same with the same variables.
                         'fused': False},
      reuse=tf.compat.v1.AUTO_REUSE, scope=scope)
  projected = tf.reshape(projected, [batch_size, -1, depth])
  if normalize:
    projected = tf.math.l2_normalize(projected, axis=-1)
  return projected


def attention_block(input_features, context_features, valid_mask,
                    bottleneck_dimension, output_dimension, temperature,
                    is_training):
  """Softmax attention of input rows into the valid context rows.

  Args:
    input_features: [batch, rows, depth] float32 (queries' input).
    context_features: [batch, context_size, context_depth] float32 (keys'
      and values' input).
    valid_mask: [batch, context_size] bool, False for padding rows.
    bottleneck_dimension: depth of queries, keys and values.
    output_dimension: depth of the output.
    temperature: softmax temperature.
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
  valid = tf.cast(valid_mask, tf.float32)
  logits = tf.matmul(queries, keys, transpose_b=True)
  logits += (1.0 - valid[:, tf.newaxis, :]) * _NEGATIVE_PADDING_VALUE
  weights = tf.nn.softmax(logits / temperature)
  attended = tf.matmul(weights, values * valid[:, :, tf.newaxis])
  return project_features(attended, output_dimension, is_training, False,
                          OUTPUT_SCOPE)


def box_context_attention(box_features, context_features, valid_context_size,
                          params, is_training):
  """Attention features of each proposal's crop, to add to the crop.

  Args:
    box_features: [batch, num_proposals, height, width, channels] float32
      ROI crops (channels static).
    context_features: [batch, max_num_context_features,
      context_feature_length] float32, zero padded.
    valid_context_size: [batch] int32 number of real context rows.
    params: ContextParams.
    is_training: batch norm in training mode.

  Returns:
    [batch, num_proposals, 1, 1, channels] float32.

  Raises:
    tf.errors.InvalidArgumentError (when run): context features whose depth
      is not params.context_feature_length.
  """
  context_features = tf.ensure_shape(
      tf.cast(context_features, tf.float32),
      [None, None, params.context_feature_length])
  valid_mask = tf.sequence_mask(
      valid_context_size,
      shape_utils.combined_static_and_dynamic_shape(context_features)[1])
  attention = attention_block(
      tf.reduce_mean(box_features, axis=[2, 3]), context_features, valid_mask,
      params.bottleneck_dimension, box_features.shape[-1],
      params.temperature, is_training)
  return attention[:, :, tf.newaxis, tf.newaxis, :]
