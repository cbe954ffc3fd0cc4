"""The interface of SSD feature extractors (a backbone plus extra layers).

The SSD meta-architecture calls `preprocess` on resized images, then
`extract_features` inside the `FeatureExtractor` variable scope; concrete
extractors live next to this file (`ssd_<backbone>_feature_extractor.py`).
"""
import abc

from absl import logging

import tensorflow as tf


class SSDFeatureExtractor(abc.ABC):
  """Builds the feature maps an SSD box predictor runs on."""

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None,
               use_explicit_padding=False, use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor.

    Args:
      is_training: whether the network is being trained.
      depth_multiplier: float multiplier on every layer's channel count.
      min_depth: the smallest channel count after the multiplier.
      pad_to_multiple: images are zero-padded so height and width are
        multiples of this.
      conv_hyperparams_fn: callable returning the slim arg_scope of the
        extra layers (and of the backbone when overriding its hyperparams).
      reuse_weights: variable reuse for the extractor's scope.
      use_explicit_padding: pad explicitly instead of 'SAME' convolutions.
      use_depthwise: depthwise-separable extra layers (SSDLite).
      num_layers: number of feature maps.
      override_base_feature_extractor_hyperparams: apply
        conv_hyperparams_fn to the backbone too.
    """
    self._is_training = is_training
    self._depth_multiplier = depth_multiplier
    self._min_depth = min_depth
    self._pad_to_multiple = pad_to_multiple
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._reuse_weights = reuse_weights
    self._use_explicit_padding = use_explicit_padding
    self._use_depthwise = use_depthwise
    self._num_layers = num_layers
    self._override_base_feature_extractor_hyperparams = (
        override_base_feature_extractor_hyperparams)

  @property
  def is_keras_model(self):
    return False

  @abc.abstractmethod
  def preprocess(self, resized_inputs):
    """Maps [batch, h, w, 3] float32 pixels in [0, 255] to network inputs."""

  @abc.abstractmethod
  def extract_features(self, preprocessed_inputs):
    """Returns a list of [batch, h_i, w_i, d_i] feature maps."""

  def owns_variable(self, variable, feature_extractor_scope):
    """Whether `variable` is the extractor's (restored from detection ones).

    Args:
      variable: a global variable of the graph.
      feature_extractor_scope: the scope the extractor was built in,
        normally 'FeatureExtractor'; slim extractors build all their
        variables below it.
    """
    return variable.op.name.startswith(feature_extractor_scope)

  def restore_from_classification_checkpoint_fn(self, feature_extractor_scope):
    """Maps backbone variables to their names in a classification checkpoint.

    Classification checkpoints hold the backbone without the detector's
    `feature_extractor_scope/` prefix (e.g. `MobilenetV2/Conv/weights`).

    Args:
      feature_extractor_scope: the scope the extractor was built in,
        normally 'FeatureExtractor'.

    Returns:
      {name in the checkpoint: variable}.
    """
    prefix = feature_extractor_scope + '/'
    variables = {}
    for variable in tf.compat.v1.global_variables():
      name = variable.op.name
      if name.startswith(prefix):
        variables[name[len(prefix):]] = variable
    return variables


def always_override_base_hyperparams(extractor, type_name):
  """For backbones without hyperparameters of their own (slim Inception).

  They always take conv_hyperparams; the original refused configs that did
  not say override_base_feature_extractor_hyperparams: true (its own
  ssd_inception_v2_pets.config among them). We build them and say so.
  """
  if not extractor._override_base_feature_extractor_hyperparams:  # pylint: disable=protected-access
    logging.warning(
        '%s: the backbone has no hyperparameters of its own and uses '
        'conv_hyperparams, as if override_base_feature_extractor_hyperparams '
        'were true.', type_name)
    extractor._override_base_feature_extractor_hyperparams = True  # pylint: disable=protected-access
