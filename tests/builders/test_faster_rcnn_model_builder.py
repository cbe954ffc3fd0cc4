"""faster_rcnn_model_builder: configs to FasterRCNNMetaArch, and refusals."""
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import faster_rcnn_model_builder
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.errors import UserInputError
from od_estimator.meta_architectures import box_classifier
from od_estimator.meta_architectures import context_rcnn_lib
from od_estimator.meta_architectures import faster_rcnn_meta_arch
from od_estimator.meta_architectures import mask_branch
from od_estimator.meta_architectures import region_proposal_network
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.predictors import two_stage_keras_names
from od_estimator.protos import model_pb2
from tests import fakes
from tests.builders import params_testing

_CONFIG = """
faster_rcnn {
  num_classes: 3
  number_of_stages: %(stages)d
  image_resizer { fixed_shape_resizer { height: 32 width: 32 } }
  feature_extractor { type: 'fake' first_stage_features_stride: 16 }
  first_stage_anchor_generator {
    grid_anchor_generator {
      scales: [0.5, 1.0] aspect_ratios: [1.0]
      height_stride: 16 width_stride: 16
    }
  }
  first_stage_box_predictor_conv_hyperparams {
    op: CONV
    regularizer { l2_regularizer { weight: 0.0 } }
    initializer { truncated_normal_initializer { stddev: 0.01 } }
  }
  first_stage_max_proposals: 8
  first_stage_box_predictor_depth: 4
  initial_crop_size: 4
  maxpool_kernel_size: 2
  maxpool_stride: 2
  second_stage_batch_size: 4
  second_stage_box_predictor {
    mask_rcnn_box_predictor {
      use_dropout: false
      fc_hyperparams {
        op: FC
        regularizer { l2_regularizer { weight: 0.0 } }
        initializer { variance_scaling_initializer { factor: 1.0 } }
      }
    }
  }
  second_stage_post_processing {
    batch_non_max_suppression {
      score_threshold: 0.0 iou_threshold: 0.6
      max_detections_per_class: 5 max_total_detections: 5
    }
    score_converter: SOFTMAX
  }
  %(extra)s
}
"""


@pytest.fixture(autouse=True)
def fake_extractor(monkeypatch):
  monkeypatch.setitem(
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
      'fake', fakes.FakeFasterRCNNFeatureExtractor)


def _config(stages=2, extra=''):
  return text_format.Parse(_CONFIG % {'stages': stages, 'extra': extra},
                           model_pb2.DetectionModel())


def _build(is_training=True, **kwargs):
  with tf.Graph().as_default():
    return model_builder.build(_config(**kwargs), is_training)


def test_registered_in_model_builder():
  assert model_builder.META_ARCH_BUILDER_MAP['faster_rcnn'] is (
      faster_rcnn_model_builder.build)
  assert 'faster_rcnn' in model_builder.supported_meta_architectures()


def _training_graph(config, image_shape):
  """(model, predictions, losses) of one image with one groundtruth box.

  Builds in the default graph.
  """
  model = model_builder.build(config, is_training=True)
  preprocessed, true_image_shapes = model.preprocess(
      tf.random.uniform([1] + image_shape + [3], 0, 255))
  model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])],
                            [tf.constant([[0.0, 1.0, 0.0]])])
  prediction_dict = model.predict(preprocessed, true_image_shapes)
  return (model, prediction_dict,
          model.loss(prediction_dict, true_image_shapes))


def test_two_stage_model_trains_on_the_fake_extractor():
  with tf.Graph().as_default():
    model, prediction_dict, loss_dict = _training_graph(_config(), [40, 40])
    assert isinstance(model, faster_rcnn_meta_arch.FasterRCNNMetaArch)
    assert model.num_classes == 3
    assert model.max_num_proposals == 4
    assert prediction_dict['class_predictions_with_background'].shape == (
        4, 4)
    assert prediction_dict['refined_box_encodings'].shape == (4, 3, 4)
    assert sorted(loss_dict) == [
        'Loss/BoxClassifierLoss/classification_loss',
        'Loss/BoxClassifierLoss/localization_loss',
        'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss']
    names = {v.op.name: v.shape.as_list()
             for v in tf.compat.v1.global_variables()}
  assert names['Conv/weights'] == [3, 3, 8, 4]
  assert names['FirstStageBoxPredictor/BoxEncodingPredictor/weights'] == [
      1, 1, 4, 2 * 4]
  assert names['FirstStageBoxPredictor/ClassPredictor/weights'] == [
      1, 1, 4, 2 * 2]
  assert names['SecondStageBoxPredictor/BoxEncodingPredictor/weights'] == [
      6, 3 * 4]
  assert names['SecondStageBoxPredictor/ClassPredictor/weights'] == [6, 4]


def test_builds_the_parts_and_hands_them_in():
  model = _build(extra='first_stage_minibatch_size: 16 '
                 'first_stage_localization_loss_weight: 2.0 '
                 'second_stage_classification_loss_weight: 0.5 '
                 'clip_anchors_to_image: true')
  assert params_testing.settings(model.params) == (
      faster_rcnn_meta_arch.ModelParams(
          num_classes=3, image_resizer_fn=None, number_of_stages=2,
          use_static_shapes=False))
  assert isinstance(model.rpn, region_proposal_network.RegionProposalNetwork)
  assert params_testing.settings(model.rpn.params) == (
      region_proposal_network.FirstStageParams(
          anchor_generator=None, conv_hyperparams_fn=None, box_predictor=None,
          target_assigner=None, sampler=None, nms_fn=None, kernel_size=3,
          depth=4, minibatch_size=16, max_proposals=8,
          localization_loss_weight=2.0, clip_anchors_to_image=True,
          layer_names=None))
  # The TF1 names: the extractor type does not end in _keras.
  assert model.rpn.params.layer_names is two_stage_keras_names.SLIM
  assert isinstance(model.box_classifier, box_classifier.BoxClassifier)
  assert params_testing.settings(model.box_classifier.params) == (
      box_classifier.SecondStageParams(
          box_predictor=None, target_assigner=None, sampler=None,
          nms_fn=None, score_conversion_fn=None, classification_loss=None,
          batch_size=4, classification_loss_weight=0.5))
  assert model.mask_branch is None
  first_stage_only = _build(stages=1)
  assert first_stage_only.box_classifier is None
  assert first_stage_only.mask_branch is None


def test_inference_model_sees_first_stage_max_proposals():
  assert _build(is_training=False).max_num_proposals == 8


def test_first_stage_only_needs_no_second_stage():
  model = _build(stages=1)
  assert model.max_num_proposals == 8


@pytest.mark.parametrize('is_training,for_eval,static', [
    (True, False, True), (False, False, False), (False, True, True)])
def test_static_shapes_in_training_or_when_asked_for_eval(is_training,
                                                         for_eval, static):
  extra = ('use_static_shapes: true use_static_balanced_label_sampler: true '
           'use_static_shapes_for_eval: %s' % str(for_eval).lower())
  model = _build(is_training=is_training, extra=extra)
  assert model.params.use_static_shapes is static


@pytest.mark.parametrize('extra,field', [
    ('output_final_box_rpn_features: true', 'output_final_box_rpn_features'),
    ('return_raw_detections_during_predict: true',
     'return_raw_detections_during_predict'),
    ('first_stage_nms_iou_threshold: 1.5', 'first_stage_nms_iou_threshold'),
])
def test_refuses_fields_it_cannot_honour(extra, field):
  with pytest.raises(UserInputError, match=field):
    _build(extra=extra)


def test_refuses_a_second_stage_batch_above_the_proposals():
  config = _config()
  config.faster_rcnn.second_stage_batch_size = 20
  with pytest.raises(UserInputError, match='second_stage_batch_size'):
    model_builder.build(config, True)


def test_mask_rcnn_is_three_stages_with_a_mask_head():
  config = _config(stages=3, extra='second_stage_mask_prediction_loss_weight: '
                   '4.0 resize_masks: false')
  predictor = config.faster_rcnn.second_stage_box_predictor
  predictor.mask_rcnn_box_predictor.predict_instance_masks = True
  predictor.mask_rcnn_box_predictor.conv_hyperparams.op = (
      predictor.mask_rcnn_box_predictor.fc_hyperparams.CONV)
  with tf.Graph().as_default():
    model = model_builder.build(config, True)
  assert model.box_classifier.params.mask_loss_weight == 4.0
  assert isinstance(model.mask_branch, mask_branch.MaskBranch)
  with pytest.raises(UserInputError, match='number_of_stages: 4'):
    model_builder.build(_config(stages=4), True)


def test_refuses_three_stages_and_other_second_stage_predictors():
  with pytest.raises(UserInputError, match='number_of_stages 3, '
                     'predict_instance_masks false'):
    _build(stages=3)
  config = _config()
  (config.faster_rcnn.second_stage_box_predictor.mask_rcnn_box_predictor
   .predict_instance_masks) = True
  with pytest.raises(UserInputError, match='predict_instance_masks'):
    model_builder.build(config, True)


def test_refuses_other_anchor_generators_and_extractor_options():
  config = _config()
  anchors = config.faster_rcnn.first_stage_anchor_generator
  anchors.ssd_anchor_generator.SetInParent()
  with pytest.raises(UserInputError, match='first_stage_anchor_generator'):
    model_builder.build(config, True)
  config = _config()
  config.faster_rcnn.feature_extractor.fpn.min_level = 2
  with pytest.raises(UserInputError, match='feature_extractor.fpn'):
    model_builder.build(config, True)


def _pyramid_config(min_level=2, max_level=6, extra=''):
  """_config on the FPN extractor: fpn levels, multiscale anchors."""
  config = _config()
  frcnn = config.faster_rcnn
  text_format.Merge("""
      type: 'faster_rcnn_resnet50_fpn_keras'
      fpn { min_level: 2 max_level: 6 }
      conv_hyperparams {
        regularizer { l2_regularizer { weight: 0.0 } }
        initializer { truncated_normal_initializer { stddev: 0.03 } }
        batch_norm { scale: true }
      }""" + extra, frcnn.feature_extractor)
  text_format.Merge("""
      multiscale_anchor_generator {
        min_level: %d max_level: %d anchor_scale: 4.0
        aspect_ratios: [1.0, 2.0, 0.5] scales_per_octave: 2
        normalize_coordinates: false
      }""" % (min_level, max_level), frcnn.first_stage_anchor_generator)
  return config


def test_pyramid_extractor_takes_its_fields_and_multiscale_anchors():
  with tf.Graph().as_default():
    model = model_builder.build(_pyramid_config(
        extra='override_base_feature_extractor_hyperparams: true '
              'pad_to_multiple: 64'), True)
  extractor = model.feature_extractor
  assert extractor.pyramid_levels == (2, 6)
  assert model.rpn.params.anchor_generator.num_anchors_per_location() == [
      6] * 5


@pytest.mark.parametrize('min_level,max_level,extra,message', [
    (3, 6, '', r'levels 3..6 must be the feature_extractor.fpn levels 2..6'),
    (1, 6, 'fpn { min_level: 1 }', 'fpn: min_level must be in'),
])
def test_pyramid_refusals(min_level, max_level, extra, message):
  with pytest.raises(UserInputError, match=message):
    with tf.Graph().as_default():
      model_builder.build(_pyramid_config(min_level, max_level, extra), True)


def test_pyramid_needs_multiscale_anchors_and_conv_hyperparams():
  config = _pyramid_config()
  anchors = config.faster_rcnn.first_stage_anchor_generator
  anchors.grid_anchor_generator.SetInParent()
  with pytest.raises(UserInputError, match='with a feature pyramid.*use '
                     'multiscale_anchor_generator'):
    model_builder.build(config, True)
  config = _pyramid_config()
  config.faster_rcnn.feature_extractor.ClearField('conv_hyperparams')
  with pytest.raises(UserInputError,
                     match='feature_extractor.conv_hyperparams must be set'):
    model_builder.build(config, True)
  config = _pyramid_config()
  config.faster_rcnn.feature_extractor.ClearField('fpn')
  with pytest.raises(UserInputError, match='feature_extractor.fpn must be '
                     'set'):
    model_builder.build(config, True)


@pytest.mark.parametrize('extractor_type,message', [
    ('faster_rcnn_pnas', 'PNASNet'),
    ('faster_rcnn_made_up', 'available types')])
def test_refuses_unknown_and_later_extractors(extractor_type, message):
  config = _config()
  config.faster_rcnn.feature_extractor.type = extractor_type
  with pytest.raises(UserInputError, match=message):
    model_builder.build(config, True)


_RFCN_PREDICTOR = """
  rfcn_box_predictor {
    conv_hyperparams {
      op: CONV
      initializer { truncated_normal_initializer { stddev: 0.01 } }
    }
    depth: 5
    crop_height: 4
    crop_width: 4
    num_spatial_bins_height: 2
    num_spatial_bins_width: 2
  }"""


def _rfcn_config(stages=2):
  """The fake-extractor config with R-FCN's second stage (no ROI crop)."""
  config = _config(stages=stages)
  faster_rcnn = config.faster_rcnn
  for field in ('initial_crop_size', 'maxpool_kernel_size', 'maxpool_stride'):
    faster_rcnn.ClearField(field)
  faster_rcnn.ClearField('second_stage_box_predictor')
  text_format.Parse(_RFCN_PREDICTOR, faster_rcnn.second_stage_box_predictor)
  return config


def test_rfcn_model_trains_on_the_fake_extractor():
  with tf.Graph().as_default():
    _, prediction_dict, loss_dict = _training_graph(_rfcn_config(),
                                                    [64, 48])
    names = {v.op.name: v.shape.as_list()
             for v in tf.compat.v1.global_variables()}
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      losses, features = sess.run(
          (loss_dict, prediction_dict['box_classifier_features']))
  # The second stage of the extractor ran once on the 2x2 feature map
  # (32x32 resized images, stride 16) and the predictor read 4 proposals.
  assert features.shape == (1, 2, 2, 6)
  assert prediction_dict['refined_box_encodings'].shape == (4, 3, 4)
  assert prediction_dict['class_predictions_with_background'].shape == (4, 4)
  assert sorted(losses) == [
      'Loss/BoxClassifierLoss/classification_loss',
      'Loss/BoxClassifierLoss/localization_loss',
      'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss']
  assert all(value >= 0 for value in losses.values())
  assert {name: shape for name, shape in names.items()
          if name.startswith('SecondStage')} == {
              'SecondStageFeatureExtractor/layer2/weights': [1, 1, 8, 6],
              'SecondStageFeatureExtractor/layer2/biases': [6],
              'SecondStageBoxPredictor/reduce_depth/weights': [1, 1, 6, 5],
              'SecondStageBoxPredictor/reduce_depth/biases': [5],
              'SecondStageBoxPredictor/refined_locations/weights': [
                  1, 1, 5, 4 * 3 * 4],
              'SecondStageBoxPredictor/refined_locations/biases': [48],
              'SecondStageBoxPredictor/class_predictions/weights': [
                  1, 1, 5, 4 * 4],
              'SecondStageBoxPredictor/class_predictions/biases': [16]}


def test_rfcn_refuses_a_third_stage_and_roi_crop_fields():
  with pytest.raises(UserInputError, match='number_of_stages 3'):
    with tf.Graph().as_default():
      model_builder.build(_rfcn_config(stages=3), True)
  for field in ('initial_crop_size', 'maxpool_kernel_size', 'maxpool_stride'):
    config = _rfcn_config()
    setattr(config.faster_rcnn, field, 2)
    with pytest.raises(UserInputError, match='faster_rcnn.%s' % field):
      with tf.Graph().as_default():
        model_builder.build(config, True)




def _context(**context_fields):
  """A context_config of 5 context rows of 6 values, with context_fields."""
  values = {'max_num_context_features': 5, 'context_feature_length': 6,
            'attention_bottleneck_dimension': 3, 'attention_temperature': 0.2}
  values.update(context_fields)
  return 'context_config { %s }' % ' '.join(
      '%s: %s' % item for item in values.items())


def test_context_config_builds_context_rcnn():
  with tf.Graph().as_default():
    model = model_builder.build(_config(extra=_context()), True)
    assert model.side_input_names == (fields.InputDataFields.context_features,
                                      fields.InputDataFields.valid_context_size)
    preprocessed, true_image_shapes = model.preprocess(
        tf.random.uniform([1, 32, 32, 3], 0, 255))
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])],
                              [tf.constant([[0.0, 1.0, 0.0]])])
    prediction_dict = model.predict(
        preprocessed, true_image_shapes, **model.get_side_inputs({
            fields.InputDataFields.context_features: tf.zeros([1, 5, 6]),
            fields.InputDataFields.valid_context_size: tf.constant([2])}))
    assert len(model.loss(prediction_dict, true_image_shapes)) == 4
    names = {v.op.name: v.shape.as_list()
             for v in tf.compat.v1.global_variables()}
  # The fake extractor's first-stage depth is 8.
  assert names['AttentionBlock/fully_connected/weights'] == [8, 3]
  assert names['AttentionBlock/fully_connected_1/weights'] == [6, 3]
  assert names['AttentionBlock/fully_connected_2/weights'] == [6, 3]
  assert names['fully_connected/weights'] == [3, 8]
  assert model.box_classifier._context == context_rcnn_lib.ContextParams(
      bottleneck_dimension=3, temperature=pytest.approx(0.2),
      context_feature_length=6)


def test_a_model_without_context_config_takes_no_side_inputs():
  model = _build()
  assert model.side_input_names == ()
  assert model.get_side_inputs(
      {fields.InputDataFields.context_features: tf.zeros([1, 5, 6])}) == {}


def test_context_config_accepts_the_single_block_spelled_out():
  assert _build(extra=_context(
      num_attention_heads=1, num_attention_layers=1,
      use_self_attention='false', use_long_term_attention='true',
      self_attention_in_sequence='false')).side_input_names


@pytest.mark.parametrize('field,value', [
    ('attention_position', 'POST_BOX_CLASSIFIER'),
    ('attention_position', 'POST_RPN'),
    ('attention_position', 'ATTENTION_DEFAULT'),
    ('use_self_attention', 'true'),
    ('use_long_term_attention', 'false'),
    ('self_attention_in_sequence', 'true'),
    ('num_attention_heads', 2),
    ('num_attention_layers', 2),
    ('attention_temperature', 0),
    ('attention_bottleneck_dimension', 0),
    ('max_num_context_features', 0),
    ('context_feature_length', -1),
])
def test_context_config_refuses_what_it_cannot_honour(field, value):
  with pytest.raises(UserInputError,
                     match='model.faster_rcnn.context_config.' + field):
    _build(extra=_context(**{field: value}))


@pytest.mark.parametrize('stages', [1, 3])
def test_context_rcnn_has_two_stages(stages):
  with pytest.raises(UserInputError, match='context_config.*number_of_stages'):
    _build(stages=stages, extra=_context())


def test_output_final_box_features_reaches_the_model():
  assert not _build(is_training=False).params.output_final_box_features
  assert _build(is_training=False, extra='output_final_box_features: true'
               ).params.output_final_box_features


@pytest.mark.parametrize('stages,extra', [
    (1, ''), (2, _context())])
def test_output_final_box_features_needs_a_plain_second_stage(stages, extra):
  with pytest.raises(UserInputError, match='output_final_box_features'):
    _build(stages=stages, extra='output_final_box_features: true ' + extra)


def test_context_rcnn_keeps_static_shapes_for_tpu():
  extra = _context() + (' use_static_shapes: true '
                        'use_static_balanced_label_sampler: true '
                        'use_matmul_crop_and_resize: true '
                        'use_matmul_gather_in_matcher: true')
  with tf.Graph().as_default() as graph:
    model = model_builder.build(_config(extra=extra), True)
    preprocessed, true_image_shapes = model.preprocess(tf.zeros([2, 32, 32,
                                                                 3]))
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])] * 2,
                              [tf.constant([[0.0, 1.0, 0.0]])] * 2)
    model.predict(preprocessed, true_image_shapes, **model.get_side_inputs({
        fields.InputDataFields.context_features: tf.zeros([2, 5, 6]),
        fields.InputDataFields.valid_context_size: tf.constant([1, 2])}))
    attention_outputs = [
        output for op in graph.get_operations()
        if op.name.startswith(('AttentionBlock/', 'fully_connected/'))
        for output in op.outputs]
  assert attention_outputs
  assert all(output.shape.is_fully_defined() for output in attention_outputs)
