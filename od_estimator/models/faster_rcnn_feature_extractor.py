"""The interface of two-stage (Faster R-CNN family) feature extractors.

A two-stage detector runs its backbone in two calls. The first,
`extract_proposal_features`, runs under the `FirstStageFeatureExtractor`
variable scope on the whole image and gives the map the region proposal
network (RPN) and the ROI crops read. The second,
`extract_box_classifier_features`, runs under `SecondStageFeatureExtractor`
on the cropped and pooled proposal features, one row per proposal, and
gives the features the box classifier's heads read. Concrete extractors
live next to this file (`faster_rcnn_<backbone>_feature_extractor.py`) and
are looked up by config type in faster_rcnn_feature_extractor_registry.py.
"""
import abc

import tensorflow as tf

from od_estimator import errors

FIRST_STAGE_SCOPE = 'FirstStageFeatureExtractor'
SECOND_STAGE_SCOPE = 'SecondStageFeatureExtractor'

# Where the constructor's arguments come from in a pipeline.config, for
# errors about values a backbone cannot honour.
CONFIG_FIELD = 'model.faster_rcnn.feature_extractor'


class FasterRCNNFeatureExtractor(abc.ABC):
  """A backbone split into a proposal stage and a box classifier stage.

  Subclasses that build only some first-stage output strides list them in
  _FIRST_STAGE_STRIDES; the constructor refuses the others.
  """

  _FIRST_STAGE_STRIDES = None
  # FasterRcnnFeatureExtractor fields beyond type, first_stage_features_
  # stride and batch_norm_trainable that the class takes, as keyword
  # arguments (faster_rcnn_model_builder refuses the others when set).
  CONFIG_FIELDS = ()

  def __init__(self, is_training, first_stage_features_stride,
               batch_norm_trainable=False, reuse_weights=None,
               weight_decay=0.0):
    """Creates the extractor.

    Args:
      is_training: whether the network is being trained.
      first_stage_features_stride: output stride of the proposal feature
        map (16, or 8 for atrous variants where the backbone supports it).
      batch_norm_trainable: whether batch norm runs in training mode and
        updates its statistics and parameters (false in the original's
        sample configs: small batches freeze it).
      reuse_weights: variable reuse for the extractor's scopes.
      weight_decay: L2 weight decay of the backbone's convolutions.

    Raises:
      UserInputError: if first_stage_features_stride is not one of
        _FIRST_STAGE_STRIDES.
    """
    self._is_training = is_training
    self._first_stage_features_stride = first_stage_features_stride
    self._train_batch_norm = batch_norm_trainable and is_training
    self._reuse_weights = reuse_weights
    self._weight_decay = weight_decay
    supported = self._FIRST_STAGE_STRIDES
    if supported is not None and first_stage_features_stride not in supported:
      raise errors.UserInputError(
          '%s.first_stage_features_stride: %s cannot produce stride %r; '
          'supported: %s.' % (
              CONFIG_FIELD, type(self).__name__, first_stage_features_stride,
              ', '.join(str(s) for s in sorted(supported))))

  @abc.abstractmethod
  def preprocess(self, resized_inputs):
    """Normalizes resized images the way the backbone was trained.

    Args:
      resized_inputs: [batch, height, width, channels] float32, 0..255.

    Returns:
      [batch, height, width, channels] float32.
    """

  def extract_proposal_features(self, preprocessed_inputs, scope):
    """Runs the first stage.

    Args:
      preprocessed_inputs: [batch, height, width, channels] float32.
      scope: the variable scope name (FIRST_STAGE_SCOPE).

    Returns:
      rpn_feature_map: [batch, height / stride, width / stride, depth].
      activations: {end point name: tensor} of the backbone.
    """
    with tf.compat.v1.variable_scope(scope, values=[preprocessed_inputs]):
      return self._extract_proposal_features(preprocessed_inputs, scope)

  @abc.abstractmethod
  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """extract_proposal_features inside its variable scope."""

  def extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Runs the second stage on cropped proposal features.

    Args:
      proposal_feature_maps: [batch * max_proposals, crop_height,
        crop_width, depth] float32.
      scope: the variable scope name (SECOND_STAGE_SCOPE).

    Returns:
      [batch * max_proposals, height, width, depth] float32.
    """
    with tf.compat.v1.variable_scope(scope, values=[proposal_feature_maps],
                                     reuse=tf.compat.v1.AUTO_REUSE):
      return self._extract_box_classifier_features(proposal_feature_maps,
                                                   scope)

  @abc.abstractmethod
  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """extract_box_classifier_features inside its variable scope."""

  def owns_variable(self, variable, feature_extractor_scope=None):
    """Whether the extractor built `variable`: by default, whether it lies
    under either stage's scope (extractors of Keras names, at the graph's
    root, answer from their own record)."""
    del feature_extractor_scope
    return variable.op.name.startswith((FIRST_STAGE_SCOPE + '/',
                                        SECOND_STAGE_SCOPE + '/'))

  def restore_from_classification_checkpoint_fn(
      self, first_stage_feature_extractor_scope,
      second_stage_feature_extractor_scope):
    """{name in a classification checkpoint: variable} for the backbone.

    A classification checkpoint names the backbone's variables without the
    two stage scopes (e.g. `resnet_v1_101/block4/...`); both stages'
    variables map to those names. When both stages hold a variable of the
    same name (a first stage that also builds the layers the second stage
    runs, as ResNet's does), the second stage's takes the checkpoint value:
    it is the one the detector uses. Extractors whose second stage is
    named differently from the classification network override this.

    Args:
      first_stage_feature_extractor_scope: e.g. FIRST_STAGE_SCOPE.
      second_stage_feature_extractor_scope: e.g. SECOND_STAGE_SCOPE.

    Returns:
      {checkpoint variable name: tf.Variable}.
    """
    variables_to_restore = {}
    for scope_name in (first_stage_feature_extractor_scope,
                       second_stage_feature_extractor_scope):
      variables_to_restore.update(variables_under_scope(scope_name))
    return variables_to_restore


def scale_to_minus_one_one(resized_inputs):
  """Maps [batch, height, width, channels] pixels in 0..255 to [-1, 1]."""
  return (2.0 / 255.0) * resized_inputs - 1.0


def variables_under_scope(scope_name):
  """{name without `scope_name/`: variable} of the graph's global variables.

  Args:
    scope_name: a top-level variable scope, e.g. FIRST_STAGE_SCOPE.
  """
  prefix = scope_name + '/'
  return {variable.op.name[len(prefix):]: variable
          for variable in tf.compat.v1.global_variables()
          if variable.op.name.startswith(prefix)}
