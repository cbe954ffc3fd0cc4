"""Narrow, shallow ResNets for the two-stage families' pipeline runs.

The families' end-to-end runs (tests/trained_models.py) check the pipeline:
model_main's training, COCO evaluation, export, serving. The network is
not what they check (the real ResNet-50 and -101 graphs are built by the
extractor's and the upstream configs' tests), and ResNet-50's 25M weights
cost most of such a run: building its graphs, 200 MB checkpoints written
and restored, a 100 MB frozen graph. This extractor is the same class
(FasterRCNNResnetV1FeatureExtractor: its preprocessing, stride handling,
scopes and classification-checkpoint restore) on a ResNet v1 of one
bottleneck unit per block, BASE_DEPTHS bottleneck channels. FPN_TYPE is
the Keras ResNet FPN extractor's class on the Keras ResNet of one block per
stage (registered as model KERAS_MODEL) at FPN_DEPTH_MULTIPLIER.

Both are registered while `registered()` is active (in its process only:
the runs take them in-process).
"""
import contextlib
import functools

import pytest
from tf_slim.nets import resnet_v1

from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import faster_rcnn_resnet_keras_feature_extractor
from od_estimator.models import faster_rcnn_resnet_v1_feature_extractor as v1
from od_estimator.models import (
    faster_rcnn_resnet_v1_fpn_keras_feature_extractor as fpn_keras)
from od_estimator.nets import resnet_v1_keras

TYPE = 'faster_rcnn_tiny_resnet'
# block1..block4's bottleneck depths (each block outputs 4x as many).
BASE_DEPTHS = (16, 32, 64, 128)
FPN_TYPE = 'faster_rcnn_tiny_resnet_fpn_keras'
KERAS_MODEL = 'resnet_v1_tiny'
FPN_DEPTH_MULTIPLIER = 0.25


def _block(index, stride):
  return resnet_v1.resnet_v1_block('block%d' % (index + 1),
                                   BASE_DEPTHS[index], 1, stride)


def tiny_resnet_v1(inputs, num_classes=None, is_training=True,
                   global_pool=True, output_stride=None, reuse=None,
                   scope='resnet_v1_tiny'):
  """resnet_v1_50's layout (strides 2, 2, 2, 1) with one unit per block."""
  return resnet_v1.resnet_v1(
      inputs, [_block(0, 2), _block(1, 2), _block(2, 2), _block(3, 1)],
      num_classes, is_training, global_pool, output_stride,
      include_root_block=True, reuse=reuse, scope=scope)


class TinyResnetFeatureExtractor(v1.FasterRCNNResnetV1FeatureExtractor):
  """FasterRCNNResnetV1FeatureExtractor on tiny_resnet_v1."""
  _ARCHITECTURE = 'resnet_v1_tiny'
  _RESNET_FN = tiny_resnet_v1
  _BLOCK4_UNITS = tuple(_block(3, 1).args)


class TinyResnetFpnKerasFeatureExtractor(
    fpn_keras.FasterRCNNResnetV1FpnKerasFeatureExtractor):
  """The Keras ResNet FPN on KERAS_MODEL at FPN_DEPTH_MULTIPLIER."""
  _MODEL = KERAS_MODEL

  def __init__(self, *args, **kwargs):
    super().__init__(*args, depth_multiplier=FPN_DEPTH_MULTIPLIER, **kwargs)


@contextlib.contextmanager
def registered():
  """Context: TYPE and FPN_TYPE are these extractors in this process."""
  extractors = (
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS)
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(extractors, TYPE, TinyResnetFeatureExtractor)
    patch.setitem(extractors, FPN_TYPE, TinyResnetFpnKerasFeatureExtractor)
    # One block per stage (conv2 .. conv5).
    patch.setitem(resnet_v1_keras._STAGE_BLOCKS, KERAS_MODEL, (1, 1, 1, 1))  # pylint: disable=protected-access
    yield


class TinyResnetKerasFeatureExtractor(
    faster_rcnn_resnet_keras_feature_extractor.
    FasterRCNNResnetKerasFeatureExtractor):
  """The Keras ResNet C4 extractor (faster_rcnn_resnet*_keras) on
  KERAS_MODEL at FPN_DEPTH_MULTIPLIER: conv1 .. conv4 its first stage,
  conv5 its second."""
  _ARCHITECTURE = KERAS_MODEL

  def _stages(self, inputs, first_stage, last_stage):
    # The C4 extractor builds its stages at full width (the original's
    # takes no depth multiplier): narrowed here, as the FPN's is.
    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(resnet_v1_keras, 'resnet_v1', functools.partial(
          resnet_v1_keras.resnet_v1, depth_multiplier=FPN_DEPTH_MULTIPLIER))
      return super()._stages(inputs, first_stage, last_stage)


@contextlib.contextmanager
def keras_c4_as(extractor_type):
  """Context: `extractor_type` (e.g. 'faster_rcnn_resnet50_keras', so that
  a sample config runs unchanged) builds TinyResnetKerasFeatureExtractor in
  this process. Takes effect within registered()."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
        extractor_type, TinyResnetKerasFeatureExtractor)
    yield
