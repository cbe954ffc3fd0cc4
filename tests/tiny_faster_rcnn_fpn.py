"""A tiny Faster R-CNN ResNet-50 FPN (faster_rcnn_resnet50_fpn_keras).

tests/tiny_faster_rcnn.py's config and overfitting recipe (64x64 images of
one large shape each) with the sample FPN config's first stage: the Keras
ResNet-50 with a feature pyramid of levels 2..6 (16x16 .. 1x1 maps) of
FPN_DEPTH channels, multiscale anchors on every level, each proposal
cropped from its level, and the FPN box head. Batch norm trains (as in the
sample config) with a fast moving-average decay, so evaluation's moving
statistics are the training batches' after a few steps; there is no
pretrained backbone to start from: its random features are frozen and the
pyramid, RPN and both heads train.
"""
from tests import tiny_faster_rcnn

FPN_DEPTH = 64
EXTRACTOR = 'faster_rcnn_resnet50_fpn_keras'
# The Keras FPN extractor's own fields (the sample config's, batch norm
# averaging fast).
KERAS_FIELDS = """batch_norm_trainable: true
      conv_hyperparams {
        activation: RELU_6
        regularizer { l2_regularizer { weight: 0.0 } }
        initializer { truncated_normal_initializer { stddev: 0.03 } }
        batch_norm { scale: true decay: 0.5 epsilon: 0.001 }
      }
      override_base_feature_extractor_hyperparams: true"""
_EXTRACTOR = """feature_extractor {
      type: '%(type)s'
      fpn { min_level: 2 max_level: 6 additional_layer_depth: %(depth)d }
      %(fields)s
    }"""
# One square anchor per cell, anchor_scale * stride pixels: 16 (level 2),
# 32 (level 3: the shapes' size), ... 256.
_ANCHORS = """first_stage_anchor_generator {
      multiscale_anchor_generator {
        min_level: 2 max_level: 6 anchor_scale: 4.0
        aspect_ratios: [1.0] scales_per_octave: 1
        normalize_coordinates: false
      }
    }"""
_TINY_EXTRACTOR = """feature_extractor {
      type: '%s'
      first_stage_features_stride: 16
    }"""
_TINY_ANCHORS = tiny_faster_rcnn.CONFIG[
    tiny_faster_rcnn.CONFIG.index('first_stage_anchor_generator {'):
    tiny_faster_rcnn.CONFIG.index(
        '\n    first_stage_box_predictor_conv_hyperparams')]
# What trains: everything but the backbone (Keras ResNet names at the root).
TRAINABLE = ('private__resnet_fpn', '^dense', '^RPNConv/', 'Predictor')


# The grid anchors once the overfitting recipe has edited them.
_OVERFIT_ANCHORS = tiny_faster_rcnn.apply_edits(
    _TINY_ANCHORS, tiny_faster_rcnn.OVERFIT_EDITS[:1])


def pyramid_edits(tiny_extractor, extractor=EXTRACTOR, fields=KERAS_FIELDS,
                  anchors=_TINY_ANCHORS):
  """tiny_faster_rcnn.apply_edits' edits: the pyramid extractor and its
  multiscale anchors in, the config's tiny_extractor (type) and grid
  anchors (text) out."""
  return ((_TINY_EXTRACTOR % tiny_extractor,
           _EXTRACTOR % {'type': extractor, 'depth': FPN_DEPTH,
                         'fields': fields}),
          (anchors, _ANCHORS))


def write_config(directory, data_dir, extractor=EXTRACTOR, fields='',
                 **kwargs):
  """tiny_faster_rcnn.write_config with the pyramid; its path.

  Args:
    directory, data_dir, **kwargs: as tiny_faster_rcnn.write_config.
    extractor: a pyramid extractor type.
    fields: more feature_extractor fields, as text.
  """
  path = tiny_faster_rcnn.write_config(directory, data_dir, **kwargs)
  with open(path) as f:
    text = f.read()
  with open(path, 'w') as f:
    f.write(tiny_faster_rcnn.apply_edits(text, pyramid_edits(
        'faster_rcnn_resnet50', extractor, fields)))
  return path


def write_overfit_config(directory, data_dir, extractor=EXTRACTOR):
  """tiny_faster_rcnn.write_overfit_config's set and recipe with the FPN
  (a pyramid extractor type), from scratch: its pyramid, RPN and heads
  train. Returns the path."""
  return tiny_faster_rcnn.write_overfit_config(
      directory, data_dir, model_fields='clip_anchors_to_image: true',
      edits=pyramid_edits('faster_rcnn_resnet50', extractor,
                          anchors=_OVERFIT_ANCHORS),
      fine_tune=False, trainable=TRAINABLE)
