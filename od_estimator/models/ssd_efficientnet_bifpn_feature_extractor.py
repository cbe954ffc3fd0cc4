"""EfficientDet: SSD on EfficientNet + BiFPN (ssd_efficientnet-b<N>_bifpn_keras).

The original builds these types only in TF2, from tf-models-official's
Keras EfficientNet and its Keras BiFPN. We build the same computation with
tf-slim layers (nets/efficientnet.py, models/bifpn.py) and the Keras
variable names, so the original's TF2 checkpoints restore:

  stem_conv2d/kernel, stack_<s>/block_<b>/...        (backbone, at the root)
  EfficientDet-D<N>/bifpn/node_<k>/<node>/...        (BiFPN)

The backbone levels are fixed blocks of EfficientNet whatever its depth, as
in the original: level 3 is the output of stack_2/block_1, level 4 of
stack_4/block_2, level 5 of stack_6/block_0 (block 0 of each stack
downsamples). Levels above 5 come from the BiFPN. The original also keeps
the classification head (top_conv2d, top_bn, logits) and any blocks after
stack_6/block_0 in its checkpoints; the detector never uses them and we do
not build them.

Inputs are scaled to [0, 1] and normalized by the ImageNet channel mean and
standard deviation. Beyond the original: depth_multiplier below 1 (which
it refuses) scales the backbone's width, for small models; images need
2**max_level pixels a side (it asks for 129, though its top levels only
line up on multiples of 2**max_level); unset bifpn num_iterations and
num_filters take the variant's values (it would build no BiFPN).
"""
import re

import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.models import bifpn
from od_estimator.models import feature_map_generators
from od_estimator.models import keras_named_feature_extractor
from od_estimator.models import ssd_feature_extractor
from od_estimator.nets import efficientnet

_FIELD = 'model.ssd.feature_extractor'
# Backbone block giving each pyramid level (its stride is 2**level).
_LEVEL_BLOCKS = {
    2: 'stack_1/block_1',
    3: 'stack_2/block_1',
    4: 'stack_4/block_2',
    5: 'stack_6/block_0',
}
# Layers with weights of a block, in the order Keras builds them.
_BLOCK_LAYERS = ('expand_conv2d', 'expand_bn', 'depthwise_conv2d',
                 'depthwise_bn', 'se_reduce_conv2d', 'se_expand_conv2d',
                 'project_conv2d', 'project_bn')
_BACKBONE_VARIABLE = re.compile(
    r'^(?:(stem)_(conv2d|bn)|stack_(\d+)/block_(\d+)/(\w+))/(\w+)$')
_BIFPN_VARIABLE = re.compile(
    r'^(?:EfficientDet-D\d(?:-D7)?|EfficientNet-B7_BiFPN)/bifpn/node_(\d+)/'
    r'[^/]+/(?:input_[^/]+/1x1_pre_sample/(conv|batchnorm)|(combine)|'
    r'post_combine/(separable_conv|batchnorm))/(\w+)$')
_EXTRACTOR_PATH = 'model/_feature_extractor'
_CHANNEL_MEAN = (0.485, 0.456, 0.406)
_CHANNEL_STDDEV = (0.229, 0.224, 0.225)


class SSDEfficientNetBiFPNFeatureExtractor(
    keras_named_feature_extractor.KerasNamedFeatureExtractorMixin,
    ssd_feature_extractor.SSDFeatureExtractor):
  """EfficientNet backbone + BiFPN; subclasses set the variant."""

  # (EfficientNet model name, Keras name of the extractor, default BiFPN
  # iterations, default BiFPN filters); subclasses.
  _VARIANT = None
  # conv_hyperparams.force_use_bias gives the BiFPN convs biases.
  honours_force_use_bias = True

  def __init__(self,
               is_training,
               depth_multiplier,
               min_depth,
               pad_to_multiple,
               conv_hyperparams_fn,
               bifpn_min_level=3,
               bifpn_max_level=7,
               bifpn_num_iterations=None,
               bifpn_num_filters=None,
               bifpn_combine_method='fast_attention',
               use_native_resize_op=False,
               reuse_weights=None,
               use_explicit_padding=False,
               use_depthwise=False,
               override_base_feature_extractor_hyperparams=False):
    """Creates the extractor.

    Args:
      is_training: see SSDFeatureExtractor; also applies drop-connect.
      depth_multiplier: scales the backbone's width coefficient (1 in the
        original, which refuses others; smaller for tiny models).
      min_depth: the BiFPN has at least this many filters.
      pad_to_multiple: see SSDFeatureExtractor.
      conv_hyperparams_fn: the BiFPN's layers (not the backbone's).
      bifpn_min_level: lowest pyramid level, 2 to 5.
      bifpn_max_level: highest pyramid level.
      bifpn_num_iterations: BiFPN passes (0 or unset: the variant's).
      bifpn_num_filters: BiFPN channels (0 or unset: the variant's).
      bifpn_combine_method: one of bifpn.COMBINE_METHODS.
      use_native_resize_op: upsample with resize_nearest_neighbor.
      reuse_weights: see SSDFeatureExtractor.
      use_explicit_padding: must be False (as the original).
      use_depthwise: must be False (as the original).
      override_base_feature_extractor_hyperparams: must be False.

    Raises:
      UserInputError: for arguments the extractor cannot honour.
    """
    _, _, iterations, filters = self._VARIANT
    self._bifpn_min_level = bifpn_min_level
    self._bifpn_max_level = bifpn_max_level
    self._bifpn_num_iterations = bifpn_num_iterations or iterations
    self._bifpn_num_filters = max(bifpn_num_filters or filters, min_depth)
    self._bifpn_combine_method = bifpn_combine_method
    self._use_native_resize_op = use_native_resize_op
    super().__init__(
        is_training, depth_multiplier, min_depth, pad_to_multiple,
        conv_hyperparams_fn, reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))

  def _check_arguments(self):
    for field in ('use_explicit_padding', 'use_depthwise',
                  'override_base_feature_extractor_hyperparams'):
      if getattr(self, '_' + field):
        raise errors.UserInputError(
            '%s.%s is not supported by the EfficientNet BiFPN extractors '
            '(as in the original).' % (_FIELD, field))
    if not 0 < self._depth_multiplier <= 1:
      raise errors.UserInputError(
          '%s.depth_multiplier must be in (0, 1] for the EfficientNet BiFPN '
          'extractors, got %s.' % (_FIELD, self._depth_multiplier))
    if not (min(_LEVEL_BLOCKS) <= self._bifpn_min_level <= max(_LEVEL_BLOCKS)
            and self._bifpn_min_level < self._bifpn_max_level):
      raise errors.UserInputError(
          '%s.bifpn: min_level must be in [2, 5] and below max_level, got '
          'min_level=%d, max_level=%d.' % (
              _FIELD, self._bifpn_min_level, self._bifpn_max_level))
    bifpn.check_combine_method(self._bifpn_combine_method, _FIELD + '.bifpn')

  def is_backbone_variable(self, name):
    """Whether a variable name is the backbone's (not below the Keras name
    of the extractor, whose BiFPN a classification checkpoint lacks)."""
    return not name.startswith(self._VARIANT[1] + '/')

  def preprocess(self, resized_inputs):
    """[0, 255] pixels -> ImageNet-normalized [0, 1] pixels."""
    return (resized_inputs / 255.0 - [[_CHANNEL_MEAN]]) / [[_CHANNEL_STDDEV]]

  def _backbone_features(self, preprocessed_inputs):
    """Backbone maps of levels bifpn_min_level..min(bifpn_max_level, 5)."""
    model_name = self._VARIANT[0]
    levels = range(self._bifpn_min_level,
                   min(self._bifpn_max_level, max(_LEVEL_BLOCKS)) + 1)
    with slim.arg_scope(efficientnet.default_arg_scope()):
      end_points = efficientnet.efficientnet(
          feature_map_generators.pad_to_multiple(preprocessed_inputs,
                                                 self._pad_to_multiple),
          model_name=model_name, last_block=_LEVEL_BLOCKS[levels[-1]],
          is_training=self._is_training,
          width_multiplier=self._depth_multiplier)
    return [end_points[_LEVEL_BLOCKS[level] + '/output'] for level in levels]

  def extract_features(self, preprocessed_inputs):
    """Builds the BiFPN feature maps.

    Args:
      preprocessed_inputs: [batch, height, width, 3] float32 output of
        `preprocess`; height and width at least 2**bifpn_max_level.

    Returns:
      List of bifpn_max_level - bifpn_min_level + 1 tensors [batch,
      height / 2**l, width / 2**l, num_filters], l = bifpn_min_level..
      bifpn_max_level, for inputs whose size is a multiple of
      2**bifpn_max_level.
    """
    preprocessed_inputs = feature_map_generators.check_min_image_dim(
        2 ** self._bifpn_max_level, preprocessed_inputs)
    hyperparams = self._conv_hyperparams_fn
    with self._keras_named(lambda name: name), \
        tf.compat.v1.variable_scope(
            tf.compat.v1.get_variable_scope(), reuse=self._reuse_weights,
            auxiliary_name_scope=False):
      features = self._backbone_features(preprocessed_inputs)
      with slim.arg_scope(hyperparams()), \
          tf.compat.v1.variable_scope(self._VARIANT[1]):
        return bifpn.bifpn(
            features, self._bifpn_min_level, self._bifpn_max_level,
            self._bifpn_num_iterations, self._bifpn_num_filters,
            combine_method=self._bifpn_combine_method,
            activation_fn=getattr(hyperparams, 'activation_fn', None),
            use_native_resize_op=self._use_native_resize_op)


def _backbone_layer_order(match):
  """Sort key of a backbone layer: the order Keras builds them in."""
  if match.group(1):
    return (-1, 0, ('conv2d', 'bn').index(match.group(2)))
  return (int(match.group(3)), int(match.group(4)),
          _BLOCK_LAYERS.index(match.group(5)))


def _bifpn_path(match):
  """The BiFPN variable's object path below the extractor's.

  Node k's blocks are lists of layers: each projected input's (the first
  input, the only one from the backbone) [conv, batch norm] as element 1
  of an (input index, layers) pair, the post-combine block's [activation,
  separable conv, batch norm]; its combine layer holds its weights.
  """
  node, projection, combine, post_combine, weight = match.groups()
  node = int(node)
  if combine:
    return '_bifpn_stage/node_combine_op/%d/%s' % (node, weight)
  if projection:
    return '_bifpn_stage/node_input_blocks/%d/0/1/%d/%s' % (
        node, ('conv', 'batchnorm').index(projection), weight)
  return '_bifpn_stage/node_post_combine_block/%d/%d/%s' % (
      node, ('separable_conv', 'batchnorm').index(post_combine) + 1, weight)


def original_object_paths(names):
  """The object paths the original saves these variables under.

  Its detection checkpoints hold the EfficientNet levels' Keras model as
  `_efficientnet` and the BiFPN as `_bifpn_stage`; its classification
  checkpoints the whole EfficientNet:

    <backbone layer>/<weight> ->
      model/_feature_extractor/_efficientnet/layer_with_weights-<k>/<weight>,
      feature_extractor/layer_with_weights-<k>/<weight>,
    k the layer's place among the layers with weights, in build order;
    <extractor>/bifpn/node_<k>/... -> model/_feature_extractor/
      _bifpn_stage/... (see _bifpn_path), in detection checkpoints only.

  Args:
    names: variable names of a graph.

  Returns:
    {name: (detection checkpoint path, classification checkpoint path or
    None)} of the names that are an EfficientDet extractor's variables.
  """
  backbone = {name: _BACKBONE_VARIABLE.match(name) for name in names}
  backbone = {name: match for name, match in backbone.items() if match}
  layers = sorted({_backbone_layer_order(match)
                   for match in backbone.values()})
  index = {layer: i for i, layer in enumerate(layers)}
  paths = {}
  for name, match in backbone.items():
    path = 'layer_with_weights-%d/%s' % (
        index[_backbone_layer_order(match)], match.group(6))
    paths[name] = ('%s/_efficientnet/%s' % (_EXTRACTOR_PATH, path),
                   'feature_extractor/' + path)
  for name in names:
    match = _BIFPN_VARIABLE.match(name)
    if match:
      paths[name] = ('%s/%s' % (_EXTRACTOR_PATH, _bifpn_path(match)), None)
  return paths


def _variant(index, keras_name, iterations, filters):
  """The extractor class of EfficientNet-B<index>."""
  return type(
      'SSDEfficientNetB%dBiFPNFeatureExtractor' % index,
      (SSDEfficientNetBiFPNFeatureExtractor,),
      {'_VARIANT': ('efficientnet-b%d' % index, keras_name, iterations,
                    filters),
       '__doc__': "'ssd_efficientnet-b%d_bifpn_keras'." % index})


# Type name -> class; the Keras names and BiFPN defaults of the original.
EXTRACTORS = {
    'ssd_efficientnet-b%d_bifpn_keras' % index: _variant(index, *variant)
    for index, variant in enumerate([
        ('EfficientDet-D0', 3, 64),
        ('EfficientDet-D1', 4, 88),
        ('EfficientDet-D2', 5, 112),
        ('EfficientDet-D3', 6, 160),
        ('EfficientDet-D4', 7, 224),
        ('EfficientDet-D5', 7, 288),
        ('EfficientDet-D6-D7', 8, 384),
        ('EfficientNet-B7_BiFPN', 8, 384),
    ])
}
