"""Object paths of the original's TF2 checkpoints, by our variable names.

For the models whose Keras names do not identify their layers (Keras
numbered them in the order it built them, so each process may name them
differently), or whose object paths do not follow from their names by the
rules of export/original_object_paths (EfficientDet's): each such model's
module tells where the original saves each of its variables.
"""
from od_estimator.models import faster_rcnn_inception_resnet_v2_keras_feature_extractor as irv2_keras
from od_estimator.models import ssd_efficientnet_bifpn_feature_extractor as efficientdet

# callable(variable names) -> {name: (path in a detection checkpoint, path
# in a classification checkpoint)} for the names of its model.
_FINDERS = (irv2_keras.original_object_paths,
            efficientdet.original_object_paths)


def known_paths(names):
  """{name: (detection checkpoint path, classification checkpoint path)}.

  Args:
    names: variable names of a graph.

  Returns:
    the paths of the names some model here knows; object paths without
    the `/.ATTRIBUTES/VARIABLE_VALUE` suffix (None for a classification
    checkpoint without the variable).
  """
  paths = {}
  for find in _FINDERS:
    paths.update(find(names))
  return paths
