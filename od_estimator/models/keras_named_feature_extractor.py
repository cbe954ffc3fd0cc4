"""Shared parts of extractors that carry the original's Keras names.

The original builds the `*_keras` extractor types as TF2 Keras models: the
backbone's variables sit at the graph root (`Conv1/kernel`,
`conv2_block1_1_conv/kernel`) and the added layers under the extractor's
Keras name, none of them under 'FeatureExtractor/' (SSD) or the two
Faster R-CNN stage scopes. Such extractors record
the variables they create and answer restore questions from that record;
`overriding_hyperparams` tells what conv_hyperparams make of their
backbone's layers.
"""
import tensorflow as tf
import tf_slim as slim
from tf_slim.ops import arg_scope as arg_scope_lib

from od_estimator.utils import keras_names


def overriding_hyperparams(conv_hyperparams_fn):
  """What conv_hyperparams make of an overridden Keras backbone's layers.

  With override_base_feature_extractor_hyperparams the original builds the
  backbone's batch norms and activations from conv_hyperparams.

  Args:
    conv_hyperparams_fn: callable returning a slim arg_scope (as
      hyperparams_builder.build returns).

  Returns:
    (batch_norm_args, activation_fn): the slim.batch_norm arguments, or
    None when conv_hyperparams have no batch_norm; the activation or None.
  """
  scope = conv_hyperparams_fn()
  conv_args = scope.get(arg_scope_lib.arg_scope_func_key(slim.conv2d), {})
  batch_norm_args = None
  if conv_args.get('normalizer_fn') is slim.batch_norm:
    batch_norm_args = scope.get(
        arg_scope_lib.arg_scope_func_key(slim.batch_norm), {})
  return batch_norm_args, conv_args.get('activation_fn')


class KerasNamedFeatureExtractorMixin:
  """Mixin for SSD and Faster R-CNN extractors built with Keras names."""

  def _keras_variables(self):
    """Every variable built by `_keras_named` so far (may repeat)."""
    return self.__dict__.setdefault('_created_keras_variables', [])

  def _keras_named(self, rename_fn):
    """Context: variables get rename_fn(name) from the graph's root.

    Args:
      rename_fn: callable(name relative to the current variable scope) ->
        the Keras name.
    """
    return keras_names.renamed_variables(rename_fn, root_scope='',
                                         created=self._keras_variables())

  def owns_variable(self, variable, feature_extractor_scope=None):
    """Whether the extractor built `variable` (scope is not the criterion)."""
    del feature_extractor_scope
    return any(variable is own for own in self._keras_variables())

  def restore_from_classification_checkpoint_fn(self,
                                                *feature_extractor_scopes):
    """{Keras name: variable} of the extractor's variables in this graph.

    As in the original's Keras extractors, the names are those of the
    model itself; a classification checkpoint holds the backbone's, and
    the added layers are reported missing.

    Args:
      *feature_extractor_scopes: unused; the names carry no such prefix.
    """
    del feature_extractor_scopes
    graph = tf.compat.v1.get_default_graph()
    return {variable.op.name: variable
            for variable in self._keras_variables()
            if variable.graph is graph}
