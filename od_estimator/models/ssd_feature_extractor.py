"""The interface of SSD feature extractors (a backbone plus extra layers).

The SSD meta-architecture calls `preprocess` on resized images, then
`extract_features` inside the `FeatureExtractor` variable scope; concrete
extractors live next to this file (`ssd_<backbone>_feature_extractor.py`).
Besides the interface, this module holds what several of them share: the
two input normalizations (as mixins) and the base of the MobileNet
extractors, whose maps are two backbone end points plus stride-2 layers.
The FPN extractors share ssd_fpn_feature_extractor.py.
"""
import abc
import contextlib

from absl import logging

import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators

# Smallest image side the MobileNets accept (their total stride is 32).
_MOBILENET_MIN_IMAGE_DIM = 33
# Nominal depths of the classic SSD maps: -1 for the two backbone end
# points, then the stride-2 layers added on top.
_SSD_LAYER_DEPTHS = (-1, -1, 512, 256, 256, 128)


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

    Raises:
      ValueError: from `_check_arguments`, for arguments the extractor
        cannot honour.
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
    self._check_arguments()

  def _check_arguments(self):
    """Raises ValueError for arguments this extractor cannot honour.

    Runs at the end of the constructor, once every argument is stored
    (subclasses with arguments of their own store them before calling it).
    An extractor may also adjust its arguments here; this one takes all.
    """

  @property
  def is_keras_model(self):
    return False

  @abc.abstractmethod
  def preprocess(self, resized_inputs):
    """Maps [batch, h, w, 3] float32 pixels in [0, 255] to network inputs."""

  @abc.abstractmethod
  def extract_features(self, preprocessed_inputs):
    """Returns a list of [batch, h_i, w_i, d_i] feature maps."""

  def _backbone_hyperparams(self):
    """Extra arg_scope on the backbone: the SSD one when overriding.

    Enter it inside the backbone's own arg_scope: conv_hyperparams_fn's
    scope dict, built on entering, then extends that scope.
    """
    if self._override_base_feature_extractor_hyperparams:
      return slim.arg_scope(self._conv_hyperparams_fn())
    return contextlib.nullcontext()

  def _multi_resolution_feature_maps(self, image_features, from_layers,
                                     layer_depths, conv_kernel_sizes=None):
    """The SSD layers with this extractor's depth and conv options.

    Call it inside the conv_hyperparams arg_scope.

    Args:
      image_features: dict {end point name: [batch, h, w, d] tensor}.
      from_layers: end point names, '' for each added stride-2 layer.
      layer_depths: nominal depth of each map, -1 for the end points.
      conv_kernel_sizes: kernel size of each map; None for 3 everywhere.

    Returns:
      List of [batch, h_i, w_i, d_i] feature maps in layout order.
    """
    layout = {
        'from_layer': list(from_layers),
        'layer_depth': list(layer_depths),
        'use_explicit_padding': self._use_explicit_padding,
        'use_depthwise': self._use_depthwise,
    }
    if conv_kernel_sizes is not None:
      layout['conv_kernel_size'] = list(conv_kernel_sizes)
    feature_maps = feature_map_generators.multi_resolution_feature_maps(
        feature_map_layout=layout,
        depth_multiplier=self._depth_multiplier,
        min_depth=self._min_depth,
        insert_1x1_conv=True,
        image_features=image_features)
    return list(feature_maps.values())

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


class SymmetricRangeInputsMixin:
  """`preprocess` of backbones trained on pixels in [-1, 1]."""

  def preprocess(self, resized_inputs):
    """Maps [batch, h, w, 3] pixels from [0, 255] to [-1, 1]."""
    return (2.0 / 255.0) * resized_inputs - 1.0


class ImageNetMeanSubtractedInputsMixin:
  """`preprocess` of backbones trained on mean-subtracted pixels (VGG)."""

  # ImageNet RGB means the slim ResNet checkpoints were trained with.
  _CHANNEL_MEANS = [123.68, 116.779, 103.939]

  def preprocess(self, resized_inputs):
    """Subtracts the ImageNet channel means from 3-channel images.

    Args:
      resized_inputs: [batch, height, width, channels] float32 pixels in
        [0, 255].

    Returns:
      Same shape; unchanged when channels != 3, as the original.
    """
    if resized_inputs.shape.as_list()[3] == 3:
      return resized_inputs - [[self._CHANNEL_MEANS]]
    return resized_inputs


class SSDMobileNetFeatureExtractorBase(SymmetricRangeInputsMixin,
                                      SSDFeatureExtractor):
  """SSD maps from two MobileNet end points plus stride-2 layers.

  The backbone and the added layers share the variable scope `_SCOPE`. The
  first two maps are the end points `_FROM_LAYERS`; the next ones are
  stride-2 layers of nominal depth 512, 256, 256 and 128, named by
  multi_resolution_feature_maps after the second end point. Subclasses set
  the class attributes below and `_backbone_arg_scope`; FPN and PPN
  variants replace `_feature_maps`. Constructor arguments are those of
  SSDFeatureExtractor.
  """

  # Variable scope of the backbone and the SSD layers.
  _SCOPE = None
  # Backbone builder taking mobilenet_v1_base's keyword arguments (a
  # staticmethod).
  _BACKBONE_FN = None
  # Replacement of the backbone's conv defs, None for its default.
  _conv_defs = None
  # The two end points feeding the first two maps, finest first; the
  # backbone is built up to the second.
  _FROM_LAYERS = None
  # Whether the added layers are built inside the backbone's arg_scope too
  # (below conv_hyperparams), as the original does for some backbones.
  _EXTRA_LAYERS_IN_BACKBONE_SCOPE = False

  def extract_features(self, preprocessed_inputs):
    """Builds the feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width must be at least 33.

    Returns:
      List of [batch, h_i, w_i, d_i] float32 feature maps, finest first.

    Raises:
      ValueError: if the static image size is below 33.
    """
    preprocessed_inputs = self._check_inputs(preprocessed_inputs)
    with tf.compat.v1.variable_scope(self._SCOPE,
                                     reuse=self._reuse_weights) as scope:
      image_features = self._backbone_end_points(preprocessed_inputs, scope)
      with self._extra_layers_scope():
        return self._feature_maps(image_features)

  def _check_inputs(self, preprocessed_inputs):
    """The inputs, checked to be at least 33 pixels high and wide."""
    return feature_map_generators.check_min_image_dim(
        _MOBILENET_MIN_IMAGE_DIM, preprocessed_inputs)

  @abc.abstractmethod
  def _backbone_arg_scope(self):
    """The backbone's own arg_scope dict.

    Its batch norm mode is left to the caller's scope (the SSD
    meta-architecture sets slim.batch_norm's is_training).
    """

  def _backbone_end_points(self, preprocessed_inputs, scope):
    """Runs the backbone, padded to pad_to_multiple, inside `scope`.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 images.
      scope: the already entered VariableScope to build the net in.

    Returns:
      dict {end point name: [batch, h, w, d] tensor}.
    """
    with slim.arg_scope(self._backbone_arg_scope()), \
        self._backbone_hyperparams():
      _, image_features = self._BACKBONE_FN(
          feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                 self._pad_to_multiple),
          final_endpoint=self._FROM_LAYERS[1],
          min_depth=self._min_depth,
          depth_multiplier=self._depth_multiplier,
          conv_defs=self._conv_defs,
          use_explicit_padding=self._use_explicit_padding,
          scope=scope)
    return image_features

  @contextlib.contextmanager
  def _extra_layers_scope(self):
    """arg_scope of the added layers (see _EXTRA_LAYERS_IN_BACKBONE_SCOPE)."""
    with (slim.arg_scope(self._backbone_arg_scope())
          if self._EXTRA_LAYERS_IN_BACKBONE_SCOPE else
          contextlib.nullcontext()):
      # Built here, so that inside the backbone's scope this dict extends
      # it; entered last, conv_hyperparams take precedence.
      with slim.arg_scope(self._conv_hyperparams_fn()):
        yield

  def _feature_maps(self, image_features):
    """Adds the SSD layers (inside `_extra_layers_scope`)."""
    from_layers = list(self._FROM_LAYERS) + [''] * 4
    return self._multi_resolution_feature_maps(
        image_features, from_layers[:self._num_layers],
        _SSD_LAYER_DEPTHS[:self._num_layers])
