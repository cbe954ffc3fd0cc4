"""post_processing_builder: NMS and score converters from text protos."""
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import post_processing_builder
from od_estimator.core import batch_post_processing
from od_estimator.protos import post_processing_pb2

# As in the SSD sample configs.
SSD_POST_PROCESSING = """
  batch_non_max_suppression {
    score_threshold: 1e-8
    iou_threshold: 0.6
    max_detections_per_class: 100
    max_total_detections: 100
  }
  score_converter: SIGMOID
"""


def _config(text):
  return text_format.Merge(text, post_processing_pb2.PostProcessing())


def test_non_max_suppressor_parameters():
  nms, _ = post_processing_builder.build(_config("""
    batch_non_max_suppression {
      score_threshold: 0.7
      iou_threshold: 0.6
      max_detections_per_class: 100
      max_total_detections: 300
      use_static_shapes: true
      use_partitioned_nms: true
      use_hard_nms: false
      change_coordinate_frame: false
    }
  """))
  assert nms.func is batch_post_processing.batch_multiclass_non_max_suppression
  kw = nms.keywords
  assert kw['max_size_per_class'] == 100
  assert kw['max_total_size'] == 300
  assert kw['score_thresh'] == pytest.approx(0.7)
  assert kw['iou_thresh'] == pytest.approx(0.6)
  assert kw['use_static_shapes'] and kw['use_partitioned_nms']
  assert not kw['change_coordinate_frame']
  assert not kw['use_class_agnostic_nms'] and not kw['use_combined_nms']
  nms, _ = post_processing_builder.build(_config(
      'batch_non_max_suppression { soft_nms_sigma: 0.4 use_cpu_nms: true }'))
  assert nms.keywords['soft_nms_sigma'] == pytest.approx(0.4)
  assert nms.keywords['use_cpu_nms']


def test_class_agnostic_parameters():
  nms, _ = post_processing_builder.build(_config("""
    batch_non_max_suppression {
      score_threshold: 0.7
      iou_threshold: 0.6
      max_detections_per_class: 10
      max_total_detections: 300
      use_class_agnostic_nms: true
      max_classes_per_detection: 1
    }
  """))
  assert nms.keywords['use_class_agnostic_nms']
  assert nms.keywords['max_classes_per_detection'] == 1
  assert nms.keywords['max_size_per_class'] == 10


def test_defaults_follow_the_schema():
  nms, converter = post_processing_builder.build(_config(''))
  # BatchNonMaxSuppression defaults; change_coordinate_frame defaults true.
  assert nms.keywords['score_thresh'] == 0.0
  assert nms.keywords['iou_thresh'] == pytest.approx(0.6)
  assert nms.keywords['max_size_per_class'] == 100
  assert nms.keywords['max_total_size'] == 100
  assert nms.keywords['change_coordinate_frame']
  assert converter.__name__ == 'identity_with_logit_scale'


@pytest.mark.parametrize('use_static_shapes', [False, True])
def test_built_nms_runs(execute, use_static_shapes):
  nms, converter = post_processing_builder.build(_config(
      SSD_POST_PROCESSING.replace('max_detections_per_class: 100',
                                  'max_detections_per_class: 2')
      .replace('max_total_detections: 100',
               'max_total_detections: 3 use_static_shapes: %s' %
               str(use_static_shapes).lower())))
  # Two overlapping boxes (IoU .8 / 1.2 = .667 > .6) and a separate one.
  boxes = np.array([[[[0., 0., 1., 1.]], [[0., .2, 1., 1.2]],
                     [[0., 3., 1., 4.]]]], np.float32)
  logits = np.array([[[2.], [1.], [0.]]], np.float32)

  def graph(boxes, logits):
    outputs = nms(boxes, converter(logits),
                  clip_window=tf.constant([[0., 0., 1., 4.]]))
    # The TPU path needs every output shape known when building the graph.
    if use_static_shapes:
      for tensor in (outputs[0], outputs[1], outputs[2], outputs[5]):
        assert tensor.shape.is_fully_defined(), tensor
    return outputs[0], outputs[1], outputs[2], outputs[5]
  out_boxes, scores, classes, num_detections = execute(graph, [boxes, logits])
  # Sigmoid scores: the second box is suppressed by the first; boxes are
  # then expressed in the [0, 0, 1, 4] window's frame (x divided by 4).
  np.testing.assert_array_equal(num_detections, [2])
  np.testing.assert_allclose(
      scores[0], [1. / (1. + np.exp(-2.)), .5, 0.], rtol=1e-6)
  np.testing.assert_array_equal(classes[0], [0., 0., 0.])
  np.testing.assert_allclose(
      out_boxes[0], [[0., 0., 1., .25], [0., .75, 1., 1.], [0., 0., 0., 0.]])


def test_identity_converter_with_logit_scale(execute):
  _, converter = post_processing_builder.build(_config("""
    score_converter: IDENTITY
    logit_scale: 2.0
  """))
  assert converter.__name__ == 'identity_with_logit_scale'
  np.testing.assert_allclose(
      execute(converter, [np.array([1., 2., -4.], np.float32)]),
      [.5, 1., -2.])


def test_sigmoid_converter(execute):
  _, converter = post_processing_builder.build(_config(SSD_POST_PROCESSING))
  assert converter.__name__ == 'sigmoid_with_logit_scale'
  # sigmoid(0) = .5, sigmoid(ln 3) = 3 / 4.
  np.testing.assert_allclose(
      execute(converter, [np.array([0., np.log(3.)], np.float32)]),
      [.5, .75], rtol=1e-6)


def test_softmax_converter_with_logit_scale(execute):
  _, converter = post_processing_builder.build(_config("""
    score_converter: SOFTMAX
    logit_scale: 2.0
  """))
  assert converter.__name__ == 'softmax_with_logit_scale'
  logits = np.array([[2., 4., 2. + 2. * np.log(2.)]], np.float32)
  # Scaled logits [1, 2, 1 + ln 2] -> e, e^2, 2e over e(3 + e).
  e = np.e
  expected = np.array([[e, e * e, 2 * e]]) / (e * (3 + e))
  np.testing.assert_allclose(execute(converter, [logits]), expected,
                             rtol=1e-5)


def test_converter_op_names():
  _, converter = post_processing_builder.build(_config(SSD_POST_PROCESSING))
  with tf.Graph().as_default() as graph:
    converter(tf.zeros([1, 3]))
  names = [op.name for op in graph.get_operations()]
  assert 'scale_logits' in names and 'convert_scores' in names


def test_temperature_scaling_calibration(execute):
  _, converter = post_processing_builder.build(_config("""
    score_converter: SIGMOID
    logit_scale: 2.0
    calibration_config {
      temperature_scaling_calibration { scaler: 3.0 }
    }
  """))
  # Logits are divided by the scaler (3) and then by logit_scale (2):
  # 6 -> 1 and -12 -> -2.
  np.testing.assert_allclose(
      execute(converter, [np.array([0., 6., -12.], np.float32)]),
      [.5, 1. / (1. + np.exp(-1.)), 1. / (1. + np.exp(2.))], rtol=1e-6)


def test_empty_calibration_config_is_ignored(execute):
  _, converter = post_processing_builder.build(_config("""
    score_converter: SIGMOID
    calibration_config {}
  """))
  np.testing.assert_allclose(
      execute(converter, [np.array([0.], np.float32)]), [.5])


@pytest.mark.parametrize('text, field', [
    ('function_approximation { x_y_pairs { x_y_pair { x: 0 y: 0 } } }',
     'function_approximation'),
    ('sigmoid_calibration { sigmoid_parameters { a: -1 b: 0 } }',
     'sigmoid_calibration'),
    ('temperature_scaling_calibration { scaler: 0 }', 'scaler'),
])
def test_unsupported_calibration(text, field):
  with pytest.raises(ValueError, match=field):
    post_processing_builder.build(_config(
        'calibration_config { %s }' % text))


@pytest.mark.parametrize('nms_text, field', [
    ('iou_threshold: 1.5', 'iou_threshold'),
    ('max_detections_per_class: 200 max_total_detections: 100',
     'max_detections_per_class'),
    ('soft_nms_sigma: -1.0', 'soft_nms_sigma'),
    ('use_combined_nms: true use_class_agnostic_nms: true',
     'use_combined_nms'),
    ('use_class_agnostic_nms: true max_classes_per_detection: 2',
     'max_classes_per_detection'),
    ('max_classes_per_detection: 3', 'max_classes_per_detection'),
    ('soft_nms_sigma: 0.5 use_static_shapes: true',
     r'soft_nms_sigma.*use_static_shapes'),
    ('soft_nms_sigma: 0.5 use_hard_nms: true',
     r'soft_nms_sigma.*use_hard_nms'),
    ('soft_nms_sigma: 0.5 use_combined_nms: true',
     r'soft_nms_sigma.*use_combined_nms'),
])
def test_bad_nms_config(nms_text, field):
  with pytest.raises(ValueError, match=field):
    post_processing_builder.build(_config(
        'batch_non_max_suppression { %s }' % nms_text))


def test_bad_logit_scale_and_type():
  with pytest.raises(ValueError, match='logit_scale'):
    post_processing_builder.build(_config('logit_scale: 0.0'))
  with pytest.raises(ValueError, match='PostProcessing'):
    post_processing_builder.build(
        post_processing_pb2.BatchNonMaxSuppression())
