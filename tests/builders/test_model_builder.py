"""model_builder from text protos written like the original's sample configs.

The feature extractor is the tiny fake of tests/fakes.py, registered under
'fake_ssd' for each test (the real MobileNets are tested on their own).
"""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.builders import model_builder
from od_estimator.core import losses
from od_estimator.meta_architectures import ssd_loss
from od_estimator.meta_architectures import ssd_meta_arch
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.protos import model_pb2
from tests import fakes
from tests.builders import params_testing

# ssd_anchor_generator with 2 layers and 3 aspect ratios: the lowest layer
# keeps 3 boxes per cell (reduce_boxes_in_lowest_layer), the other one has
# 3 + 1 (the interpolated scale). The fake extractor's maps are 2x2 and 1x1:
# 2 * 2 * 3 + 1 * 1 * 4 = 16 anchors.
NUM_ANCHORS = 16
HYPERPARAMS = """
        activation: RELU_6
        regularizer { l2_regularizer { weight: 0.00004 } }
        initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
        batch_norm { train: true scale: true center: true decay: 0.97
                     epsilon: 0.001 }
"""
SSD_CONFIG = """
  ssd {
    num_classes: 3
    image_resizer { fixed_shape_resizer { height: 32 width: 32 } }
    feature_extractor {
      type: "fake_ssd"
      depth_multiplier: 0.5
      min_depth: 8
      num_layers: 2
      conv_hyperparams { %(hyperparams)s }
    }
    box_coder {
      faster_rcnn_box_coder { y_scale: 10.0 x_scale: 10.0 height_scale: 5.0
                              width_scale: 5.0 }
    }
    matcher {
      argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5
                       negatives_lower_than_unmatched: true
                       force_match_for_each_row: true }
    }
    similarity_calculator { iou_similarity {} }
    anchor_generator {
      ssd_anchor_generator { num_layers: 2 min_scale: 0.2 max_scale: 0.95
                             aspect_ratios: [1.0, 2.0, 0.5] }
    }
    box_predictor {
      convolutional_box_predictor {
        kernel_size: 1
        box_code_size: 4
        conv_hyperparams { %(hyperparams)s }
      }
    }
    loss {
      classification_loss { weighted_sigmoid_focal { gamma: 2.0 alpha: 0.25 } }
      localization_loss { weighted_smooth_l1 {} }
      classification_weight: 1.0
      localization_weight: 1.0
    }
    normalize_loss_by_num_matches: true
    post_processing {
      batch_non_max_suppression {
        score_threshold: 1e-4
        iou_threshold: 0.5
        max_detections_per_class: 5
        max_total_detections: 5
      }
      score_converter: SIGMOID
    }
    %(extra)s
  }
"""


def _config(extra='', text=None):
  if text is None:
    text = SSD_CONFIG % {'hyperparams': HYPERPARAMS, 'extra': extra}
  return text_format.Merge(text, model_pb2.DetectionModel())


class _RecordingExtractor(fakes.FakeSSDFeatureExtractor):
  """The fake extractor, keeping the arguments the builder gave it."""

  def __init__(self, **arguments):
    super().__init__(**arguments)
    self.arguments = arguments


@pytest.fixture(autouse=True)
def fake_extractors(monkeypatch):
  registry = ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS
  monkeypatch.setitem(registry, 'fake_ssd', fakes.FakeSSDFeatureExtractor)
  monkeypatch.setitem(registry, 'recording_ssd', _RecordingExtractor)
  monkeypatch.setitem(registry, 'fake_ssd_fpn', fakes.FakeFpnFeatureExtractor)
  # A Keras (TF2) model's type, as the builder tells them apart.
  monkeypatch.setitem(registry, 'fake_ssd_keras', fakes.FakeSSDFeatureExtractor)


def test_builds_a_working_ssd(execute):
  def graph(images):
    model = model_builder.build(_config(), is_training=True)
    assert isinstance(model, ssd_meta_arch.SSDMetaArch)
    assert model.num_classes == 3
    preprocessed, true_shapes = model.preprocess(images)
    predictions = model.predict(preprocessed, true_shapes)
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])],
                              [tf.constant([[0.0, 1.0, 0.0]])])
    return (predictions, model.loss(predictions, true_shapes),
            model.postprocess(predictions, true_shapes))
  predictions, loss_dict, detections = execute(
      graph, [np.zeros([1, 40, 48, 3], np.float32)])
  assert predictions['preprocessed_inputs'].shape == (1, 32, 32, 3)
  assert predictions['box_encodings'].shape == (1, NUM_ANCHORS, 4)
  assert predictions['class_predictions_with_background'].shape == (
      1, NUM_ANCHORS, 4)
  assert all(np.isfinite(value) for value in loss_dict.values())
  assert detections['detection_boxes'].shape == (1, 5, 4)
  assert detections['detection_classes'].max() < 3


def test_maps_ssd_fields_to_the_meta_architecture():
  extra = """
    encode_background_as_zeros: true
    negative_class_weight: 0.5
    normalize_loss_by_num_matches: false
    normalize_loc_loss_by_codesize: true
    freeze_batchnorm: true
    inplace_batchnorm_update: true
    return_raw_detections_during_predict: true
    use_confidences_as_targets: true
    implicit_example_weight: 0.25
  """
  config = _config(extra)
  config.ssd.feature_extractor.type = 'recording_ssd'
  config.ssd.loss.classification_loss.weighted_sigmoid.SetInParent()
  config.ssd.loss.hard_example_miner.num_hard_examples = 8
  with tf.Graph().as_default():
    model = model_builder.build(config, is_training=False,
                                add_summaries=False)
  assert params_testing.settings(model.params) == ssd_meta_arch.ModelParams(
      image_resizer_fn=None, freeze_batchnorm=True,
      inplace_batchnorm_update=True,
      return_raw_detections_during_predict=True)
  loss_params = model.loss_part.params
  assert params_testing.settings(loss_params) == ssd_loss.SSDLossParams(
      target_assigner=None, classification_loss=None, localization_loss=None,
      normalize_loss_by_num_matches=False,
      normalize_loc_loss_by_codesize=True, encode_background_as_zeros=True,
      hard_example_miner=None, use_confidences_as_targets=True,
      implicit_example_weight=0.25, add_summaries=False)
  assert isinstance(loss_params.hard_example_miner, losses.HardExampleMiner)
  assert isinstance(loss_params.classification_loss,
                    losses.WeightedSigmoidClassificationLoss)
  assert isinstance(loss_params.localization_loss,
                    losses.WeightedSmoothL1LocalizationLoss)
  # One box coder: the head decodes what the target assigner encodes.
  assert model.head.box_coder is loss_params.target_assigner.box_coder
  assert isinstance(model.head.box_coder,
                    faster_rcnn_box_coder.FasterRcnnBoxCoder)
  arguments = model.feature_extractor.arguments
  assert (arguments['is_training'], arguments['depth_multiplier'],
          arguments['min_depth'], arguments['num_layers']) == (False, 0.5, 8,
                                                               2)


def test_fpn_options_reach_an_extractor_that_takes_them():
  config = _config()
  config.ssd.feature_extractor.type = 'fake_ssd_fpn'
  config.ssd.feature_extractor.fpn.max_level = 5
  config.ssd.feature_extractor.fpn.additional_layer_depth = 64
  with tf.Graph().as_default():
    model = model_builder.build(config, is_training=True)
  assert model.feature_extractor.fpn_levels == (3, 5, 64)


@pytest.mark.parametrize('field', ['fpn', 'bifpn'])
def test_pyramid_options_the_extractor_lacks_are_errors(field):
  config = _config()
  getattr(config.ssd.feature_extractor, field).min_level = 3
  with pytest.raises(ValueError,
                     match=r'model\.ssd\.feature_extractor\.%s' % field):
    model_builder.build(config, is_training=True)


def test_use_hardswish_the_extractor_lacks_is_an_error():
  config = _config()
  config.ssd.feature_extractor.use_hardswish = True
  with pytest.raises(ValueError, match='feature_extractor.use_hardswish'):
    model_builder.build(config, is_training=True)


def test_unknown_extractor_lists_the_available_ones():
  config = _config()
  config.ssd.feature_extractor.type = 'ssd_not_a_backbone'
  with pytest.raises(ValueError) as error:
    model_builder.build(config, is_training=True)
  message = str(error.value)
  assert 'ssd_not_a_backbone' in message
  assert 'fake_ssd' in message and 'ssd_mobilenet_v2' in message


def test_mask_head_is_an_error():
  with pytest.raises(ValueError, match=r'model\.ssd\.mask_head_config'):
    model_builder.build(_config('mask_head_config { mask_height: 15 }'),
                        is_training=True)


def test_faster_rcnn_goes_to_its_builder():
  # Its own tests: tests/builders/test_faster_rcnn_model_builder.py.
  config = _config(text='faster_rcnn { num_classes: 3 }')
  with pytest.raises(ValueError, match=r'model\.faster_rcnn\.first_stage_'
                     r'anchor_generator'):
    model_builder.build(config, is_training=True)
  assert 'faster_rcnn' in model_builder.supported_meta_architectures()


@pytest.mark.parametrize('text,field', [
    ('experimental_model { name: "x" }', 'experimental_model'),
    ('center_net { }', 'center_net'),
])
def test_other_meta_architectures_are_named(text, field):
  with pytest.raises(ValueError, match=r'model\.%s' % field):
    model_builder.build(_config(text=text), is_training=True)


def test_bad_configs():
  with pytest.raises(ValueError, match='DetectionModel'):
    model_builder.build(_config().ssd, is_training=True)
  with pytest.raises(ValueError, match='no meta-architecture'):
    model_builder.build(model_pb2.DetectionModel(), is_training=True)
  config = _config()
  config.ssd.num_classes = 0
  with pytest.raises(ValueError, match=r'model\.ssd\.num_classes'):
    model_builder.build(config, is_training=True)


def test_backbone_batch_norm_follows_training_mode_with_override():
  """With override_base_feature_extractor_hyperparams the backbone's batch
  norm must still train in training graphs and use moving averages in
  evaluation graphs (regression: it was frozen in inference mode)."""
  from od_estimator.config import config_util
  from tests import tiny_ssd
  configs = config_util.get_configs_from_pipeline_file(tiny_ssd.DEMO_CONFIG)
  model_config = configs['model']
  model_config.ssd.feature_extractor.override_base_feature_extractor_hyperparams = True
  model_config.ssd.feature_extractor.depth_multiplier = 0.25
  for training in (True, False):
    with tf.Graph().as_default() as graph:
      model = model_builder.build(model_config, is_training=training)
      images, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
      model.predict(images, shapes)
      modes = {op.get_attr('is_training') for op in graph.get_operations()
               if op.type.startswith('FusedBatchNorm') and
               '/MobilenetV2/' in op.name}
      assert modes == {training}


@pytest.mark.parametrize('extractor_type', ['fake_ssd', 'fake_ssd_keras'])
def test_freeze_batchnorm_freezes_the_predictor_of_keras_types_only(
    extractor_type):
  """As the original: its Keras (TF2) models freeze every batch norm, its
  slim (TF1) ones leave the box predictor's (hyperparams of its own)
  training."""
  config = _config('freeze_batchnorm: true')
  config.ssd.feature_extractor.type = extractor_type
  # A layer of the predictor's own, batch-normalized, before its heads.
  predictor = config.ssd.box_predictor.convolutional_box_predictor
  predictor.num_layers_before_predictor = 1
  predictor.min_depth = predictor.max_depth = 8
  with tf.Graph().as_default() as graph:
    model = model_builder.build(config, is_training=True)
    model.predict(*model.preprocess(tf.zeros([1, 32, 32, 3])))
  modes = {op.get_attr('is_training') for op in graph.get_operations()
           if op.type.startswith('FusedBatchNorm') and
           'BoxPredictor' in op.name}
  assert modes == {extractor_type == 'fake_ssd'}


def test_registry_names_supported_families_and_refuses_others():
  from od_estimator.errors import UserInputError
  assert 'ssd' in model_builder.supported_meta_architectures()
  assert 'center_net' not in model_builder.supported_meta_architectures()
  config = model_pb2.DetectionModel()
  config.center_net.num_classes = 3
  with pytest.raises(UserInputError, match='model.center_net'):
    model_builder.build(config, is_training=False)
