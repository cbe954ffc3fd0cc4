"""box_predictor_builder: the heads' settings where the original's builder
tests read them (attributes of the built predictor and its heads)."""
from unittest import mock

from google.protobuf import text_format
import pytest

from od_estimator.builders import box_predictor_builder
from od_estimator.predictors import mask_rcnn_box_predictor
from od_estimator.protos import box_predictor_pb2
from od_estimator.protos import hyperparams_pb2


def _build(text, argscope_fn=None, is_training=True):
  config = text_format.Parse(text, box_predictor_pb2.BoxPredictor())
  argscope_fn = argscope_fn or mock.Mock(return_value='arg_scope')
  return box_predictor_builder.build(argscope_fn=argscope_fn,
                                     box_predictor_config=config,
                                     is_training=is_training, num_classes=90)


def test_non_default_mask_rcnn_box_predictor():
  predictor = _build("""
    mask_rcnn_box_predictor {
      fc_hyperparams { op: FC activation: RELU_6 }
      use_dropout: true
      dropout_keep_probability: 0.8
      box_code_size: 3
      share_box_across_classes: true
    }""", argscope_fn=lambda config, is_training: (config, is_training))
  box_head = predictor._box_prediction_head  # pylint: disable=protected-access
  class_head = predictor._class_prediction_head  # pylint: disable=protected-access
  assert box_head._use_dropout and class_head._use_dropout  # pylint: disable=protected-access
  assert box_head._dropout_keep_prob == pytest.approx(0.8)  # pylint: disable=protected-access
  assert class_head._dropout_keep_prob == pytest.approx(0.8)  # pylint: disable=protected-access
  assert predictor.num_classes == 90 and predictor._is_training  # pylint: disable=protected-access
  assert box_head._box_code_size == 3  # pylint: disable=protected-access
  assert box_head._share_box_across_classes is True  # pylint: disable=protected-access


def test_default_mask_rcnn_box_predictor():
  predictor = _build('mask_rcnn_box_predictor { fc_hyperparams { op: FC } }')
  box_head = predictor._box_prediction_head  # pylint: disable=protected-access
  class_head = predictor._class_prediction_head  # pylint: disable=protected-access
  assert not box_head._use_dropout and not class_head._use_dropout  # pylint: disable=protected-access
  assert box_head._dropout_keep_prob == pytest.approx(0.5)  # pylint: disable=protected-access
  assert box_head._box_code_size == 4  # pylint: disable=protected-access
  assert box_head._share_box_across_classes is False  # pylint: disable=protected-access
  assert not predictor._third_stage_heads  # pylint: disable=protected-access


def test_mask_branch_settings():
  config = box_predictor_pb2.BoxPredictor()
  options = config.mask_rcnn_box_predictor
  options.fc_hyperparams.op = hyperparams_pb2.Hyperparams.FC
  options.conv_hyperparams.op = hyperparams_pb2.Hyperparams.CONV
  options.predict_instance_masks = True
  options.mask_prediction_conv_depth = 512
  options.mask_height = 24
  options.mask_width = 24
  options.convolve_then_upsample_masks = True
  argscope_fn = mock.Mock(return_value='arg_scope')
  predictor = _build(text_format.MessageToString(config), argscope_fn)
  argscope_fn.assert_has_calls([mock.call(options.fc_hyperparams, True),
                                mock.call(options.conv_hyperparams, True)],
                               any_order=True)
  mask_head = predictor._third_stage_heads[  # pylint: disable=protected-access
      mask_rcnn_box_predictor.MASK_PREDICTIONS]
  assert mask_head._mask_prediction_conv_depth == 512  # pylint: disable=protected-access
  assert mask_head._convolve_then_upsample  # pylint: disable=protected-access
  assert mask_head._mask_prediction_num_conv_layers == 2  # pylint: disable=protected-access
  assert mask_head._masks_are_class_agnostic is False  # pylint: disable=protected-access
  assert (mask_head._mask_height, mask_head._mask_width) == (24, 24)  # pylint: disable=protected-access


def test_rfcn_box_predictor_settings():
  for text, bins, crop, code_size in (
      ('', [3, 3], [12, 12], 4),
      ('num_spatial_bins_height: 4 num_spatial_bins_width: 4 depth: 4 '
       'box_code_size: 3 crop_height: 16 crop_width: 16', [4, 4], [16, 16],
       3)):
    predictor = _build(
        'rfcn_box_predictor { conv_hyperparams { op: CONV } %s }' % text,
        argscope_fn=lambda config, is_training: (config, is_training))
    assert predictor.num_classes == 90 and predictor._is_training  # pylint: disable=protected-access
    assert predictor._box_code_size == code_size  # pylint: disable=protected-access
    assert predictor._num_spatial_bins == bins  # pylint: disable=protected-access
    assert predictor._crop_size == crop  # pylint: disable=protected-access
    config, is_training = predictor._conv_hyperparams_fn  # pylint: disable=protected-access
    assert config.op == hyperparams_pb2.Hyperparams.CONV and is_training
