"""Context R-CNN's context features, ready for static padding.

An example read with load_context_features carries context_features
[num_context, length] (the record's image/context_features reshaped by its
image/context_feature_length). For static shapes they are padded with
zero rows (or clipped) to model.faster_rcnn.context_config.
max_num_context_features, and valid_context_size says how many rows are
real, as in the original.
"""
import tensorflow as tf

from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.input_pipeline import input_checks

_IN = fields.InputDataFields
CONFIG_LENGTH_FIELD = 'model.faster_rcnn.context_config.context_feature_length'


def with_valid_context_size(tensor_dict, max_num_context_features,
                            context_feature_length):
  """Adds valid_context_size and checks the feature length.

  Args:
    tensor_dict: one example's tensors with context_features
      [num_context, record length] float32 (or bfloat16).
    max_num_context_features: rows after padding.
    context_feature_length: the length the model expects.

  Returns:
    A new dict with valid_context_size, an int32 scalar:
    min(num_context, max_num_context_features) (the original counts rows
    past the padded size too; the model's mask of valid rows is the same).

  Raises:
    ValueError: when either size is None (no model context_config).
    tf.errors.InvalidArgumentError: at run time, when the record's
      context_feature_length is not the model's, naming both.
  """
  if max_num_context_features is None or context_feature_length is None:
    raise ValueError(
        'context_features need max_num_context_features and '
        'context_feature_length: set model.faster_rcnn.context_config, or '
        'remove load_context_features from the input reader')
  out = dict(tensor_dict)
  features = out[_IN.context_features]
  record_length = tf.shape(features)[1]
  check = tf.debugging.Assert(
      tf.equal(record_length, context_feature_length),
      ['image/context_feature_length of the record is', record_length,
       'but %s is %d; write the context features with the length the model '
       'expects, or set it to theirs' % (CONFIG_LENGTH_FIELD,
                                         context_feature_length),
       'source_id:', out.get(_IN.source_id, '')])
  with tf.control_dependencies([check]):
    out[_IN.context_features] = tf.identity(features)
  out[_IN.valid_context_size] = tf.minimum(tf.shape(features)[0],
                                           max_num_context_features)
  return out


def side_input_specs(model_config, batch_size=1):
  """The side inputs a served model takes, as the exports name them.

  Args:
    model_config: model_pb2.DetectionModel.
    batch_size: the batch dimension of each side input (None for any).

  Returns:
    [(name, shape, tf.DType)]: for a Context R-CNN context_features
    [batch_size, max_num_context_features, context_feature_length] float32
    and valid_context_size [batch_size] int32; [] for other models.
  """
  if not input_checks.is_context_rcnn(model_config):
    return []
  return [(_IN.context_features,
           [batch_size,
            config_util.get_max_num_context_features(model_config),
            config_util.get_context_feature_length(model_config)],
           tf.float32),
          (_IN.valid_context_size, [batch_size], tf.int32)]
