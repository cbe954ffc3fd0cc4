"""Inception-ResNet v2 for Faster R-CNN as the original's TF2 Keras model.

`faster_rcnn_inception_resnet_v2_keras` (the TF2 Mask R-CNN sample
config's type). The original builds one Keras Inception-ResNet v2 with
'SAME' reductions and splits it at the block17 stack's output
(`block17_20_ac`, our PreAuxLogits): the layers up to there give the
proposal features, the rest (Mixed_7a to `conv_7b_ac`, our Conv2d_7b_1x1)
runs on the crops. That is the network of faster_rcnn_inception_resnet_v2
with two differences in what it computes:

- the second stage's reductions (Mixed_7a) pad 'SAME' too: 17 x 17 crops
  give 9 x 9 box classifier features, where 'VALID' gives 8 x 8;
- output stride 16 only: at 8 the original's Keras model strides Mixed_7a's
  384-filter branch 1 and its other branches 2, and fails on any crop.

Each stage's variables take the Keras names (nets/inception_resnet_v2_keras)
below `<stage scope>/InceptionResnetV2/`, e.g.
`FirstStageFeatureExtractor/InceptionResnetV2/conv2d_8/kernel`,
`SecondStageFeatureExtractor/InceptionResnetV2/conv_7b_bn/beta`; the
original's checkpoints are read by object path (original_object_paths).
"""
import re

from od_estimator.models import faster_rcnn_feature_extractor as base
from od_estimator.models import faster_rcnn_inception_resnet_v2_feature_extractor as irv2_extractor
from od_estimator.nets import inception_resnet_v2
from od_estimator.nets import inception_resnet_v2_keras
from od_estimator.utils import keras_names

_SCOPE = 'InceptionResnetV2'
# Where the original's detection checkpoints hold each stage's Keras model
# (its meta-architecture's attributes), and its classification checkpoints
# the whole network.
_STAGE_PATHS = {
    base.FIRST_STAGE_SCOPE: 'model/_feature_extractor_for_proposal_features',
    base.SECOND_STAGE_SCOPE:
        'model/_feature_extractor_for_box_classifier_features',
}
_CLASSIFICATION_PATH = 'feature_extractor'
_VARIABLE = re.compile(r'^(%s)/%s/([^/]+)/([^/]+)$' % (
    '|'.join(_STAGE_PATHS), _SCOPE))


def _keras_name(name):
  """'InceptionResnetV2/<slim name>' -> 'InceptionResnetV2/<Keras name>'."""
  prefix = _SCOPE + '/'
  if not name.startswith(prefix):
    raise ValueError('Variable %r is outside %s.' % (name, prefix))
  return prefix + inception_resnet_v2_keras.keras_variable_name(
      name[len(prefix):])


class FasterRCNNInceptionResnetV2KerasFeatureExtractor(
    irv2_extractor.FasterRCNNInceptionResnetV2FeatureExtractor):
  """`faster_rcnn_inception_resnet_v2_keras`: the Keras model's layout."""

  _FIRST_STAGE_STRIDES = (16,)
  _SECOND_STAGE_PADDING = 'SAME'
  _SECOND_STAGE_REPEAT = inception_resnet_v2.BLOCK8_STACK[0]

  def _variable_naming(self):
    """Variables take the Keras names below the stage's scope."""
    return keras_names.renamed_variables(_keras_name)

  def restore_from_classification_checkpoint_fn(
      self, first_stage_feature_extractor_scope,
      second_stage_feature_extractor_scope):
    """{Keras name, e.g. 'conv2d_8/kernel': variable} of both stages.

    The names the original's classification checkpoint records for the
    whole network (built once in its process); restoring reads it by
    object path.

    Args:
      first_stage_feature_extractor_scope: e.g. FIRST_STAGE_SCOPE.
      second_stage_feature_extractor_scope: e.g. SECOND_STAGE_SCOPE.

    Returns:
      {Keras variable name: tf.Variable}.
    """
    prefix = _SCOPE + '/'
    variables = {}
    for scope in (first_stage_feature_extractor_scope,
                  second_stage_feature_extractor_scope):
      for name, variable in base.variables_under_scope(scope).items():
        if name.startswith(prefix):
          variables[name[len(prefix):]] = variable
    return variables


def original_object_paths(names):
  """The object paths the original saves these variables under.

  Its detection checkpoints hold the proposal features' Keras model and
  the box classifier's, each counting its own layers with weights; its
  classification checkpoints hold the whole network:

    <stage>/InceptionResnetV2/<layer>/<weight> ->
      model/_feature_extractor_for_proposal_features/
        layer_with_weights-<k>/<weight> (first stage), or
      model/_feature_extractor_for_box_classifier_features/
        layer_with_weights-<k - first stage layers>/<weight> (second);
      feature_extractor/layer_with_weights-<k>/<weight>,
    k the layer's place in the network (inception_resnet_v2_keras).

  Args:
    names: variable names of a graph.

  Returns:
    {name: (detection checkpoint path, classification checkpoint path)}
    of the names that are this extractor's variables.
  """
  paths = {}
  for name in names:
    match = _VARIABLE.match(name)
    layer = match and inception_resnet_v2_keras.BY_NAME.get(match.group(2))
    if not layer or layer.first_stage != (
        match.group(1) == base.FIRST_STAGE_SCOPE):
      continue
    weight = match.group(3)
    index = layer.index - (
        0 if layer.first_stage else inception_resnet_v2_keras
        .FIRST_STAGE_LAYERS)
    paths[name] = (
        '%s/layer_with_weights-%d/%s' % (_STAGE_PATHS[match.group(1)], index,
                                         weight),
        '%s/layer_with_weights-%d/%s' % (_CLASSIFICATION_PATH, layer.index,
                                         weight))
  return paths
