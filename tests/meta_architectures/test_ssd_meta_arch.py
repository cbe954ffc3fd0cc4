"""SSDMetaArch with tiny fakes: a 1x1-conv extractor and a 2x2 anchor grid.

Anchors are the four quadrants of the image (fakes.QUADRANT_ANCHORS), the
box coder is MeanStddevBoxCoder(stddev=0.1), so code = (box - anchor) / 0.1
and decoding is anchor + 0.1 * code.
"""
import dataclasses
import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.box_coders import mean_stddev_box_coder
from od_estimator.core import balanced_positive_negative_sampler
from od_estimator.core import image_resizing
from od_estimator.core import losses
from od_estimator.core import batch_post_processing
from od_estimator.core import region_similarity_calculator
from od_estimator.core import target_assigner
from od_estimator.matchers import argmax_matcher
from od_estimator.meta_architectures import ssd_loss
from od_estimator.meta_architectures import ssd_meta_arch
from od_estimator.models import ssd_feature_extractor
from tests import fakes

NUM_CLASSES = 2
BATCH = 2
STDDEV = 0.1


def _build_model(is_training=True, num_layers=1, use_batch_norm=False,
                 conv_hyperparams_fn=None, predictor_background=True,
                 **kwargs):
  """An SSDMetaArch of fakes; kwargs override ModelParams or SSDLossParams."""
  model_fields = {field.name
                  for field in dataclasses.fields(ssd_meta_arch.ModelParams)}
  box_coder = mean_stddev_box_coder.MeanStddevBoxCoder(stddev=STDDEV)
  model_params = ssd_meta_arch.ModelParams(
      image_resizer_fn=functools.partial(image_resizing.resize_image,
                                         new_height=4, new_width=4),
      **{name: value for name, value in kwargs.items()
         if name in model_fields})
  loss_params = ssd_loss.SSDLossParams(
      target_assigner=target_assigner.TargetAssigner(
          region_similarity_calculator.IouSimilarity(),
          argmax_matcher.ArgMaxMatcher(0.5, 0.5), box_coder),
      classification_loss=losses.WeightedSigmoidClassificationLoss(),
      localization_loss=losses.WeightedSmoothL1LocalizationLoss(),
      **{name: value for name, value in kwargs.items()
         if name not in model_fields})
  head = ssd_meta_arch.HeadParams(
      anchor_generator=fakes.FakeAnchorGenerator2x2(num_layers),
      box_predictor=fakes.FakeBoxPredictor(
          is_training, NUM_CLASSES, add_background_class=predictor_background),
      box_coder=box_coder,
      non_max_suppression_fn=functools.partial(
          batch_post_processing.batch_multiclass_non_max_suppression,
          score_thresh=0.5, iou_thresh=0.5, max_size_per_class=4,
          max_total_size=4),
      score_conversion_fn=tf.sigmoid)
  return ssd_meta_arch.SSDMetaArch(
      is_training,
      fakes.FakeSSDFeatureExtractor(
          is_training=is_training, num_layers=num_layers,
          use_batch_norm=use_batch_norm,
          conv_hyperparams_fn=conv_hyperparams_fn),
      model_params, head,
      ssd_loss.SSDLoss(loss_params, NUM_CLASSES, is_training,
                       model_params.add_background_class))


# --- preprocess / predict -------------------------------------------------


@pytest.mark.parametrize('dynamic', [False, True])
def test_preprocess_resizes_and_normalizes(execute, dynamic):
  def graph(images):
    return _build_model().preprocess(images)
  images = np.full([BATCH, 8, 6, 3], 255.0, np.float32)
  preprocessed, true_shapes = execute(graph, [images], dynamic=dynamic)
  # Constant 255 stays 255 after bilinear resizing; 2 / 255 * 255 - 1 = 1.
  np.testing.assert_allclose(preprocessed, np.ones([BATCH, 4, 4, 3]))
  np.testing.assert_array_equal(true_shapes, [[4, 4, 3]] * BATCH)


def test_preprocess_rejects_non_float_images():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='float32'):
      _build_model().preprocess(tf.zeros([1, 4, 4, 3], tf.int32))


@pytest.mark.parametrize('dynamic', [False, True])
def test_predict_shapes(execute, dynamic):
  def graph(images):
    model = _build_model(num_layers=2,
                         return_raw_detections_during_predict=True)
    if dynamic:
      # Only the batch is unknown: the fake extractor needs a static size.
      images = tf.compat.v1.placeholder_with_default(
          images, [None, 4, 4, 3])
    predictions = model.predict(images, None)
    assert sorted(model.batched_prediction_tensor_names) == sorted(
        key for key in predictions if key != 'anchors')
    return predictions
  outputs = execute(graph, [np.zeros([BATCH, 4, 4, 3], np.float32)])
  num_anchors = 4 + 1  # 2x2 map plus 1x1 map, one anchor per cell.
  assert outputs['preprocessed_inputs'].shape == (BATCH, 4, 4, 3)
  assert outputs['box_encodings'].shape == (BATCH, num_anchors, 4)
  assert outputs['class_predictions_with_background'].shape == (
      BATCH, num_anchors, NUM_CLASSES + 1)
  assert [f.shape for f in outputs['feature_maps']] == [
      (BATCH, 2, 2, 8), (BATCH, 1, 1, 8)]
  expected_anchors = fakes.QUADRANT_ANCHORS + fakes.WHOLE_IMAGE_ANCHOR
  np.testing.assert_allclose(outputs['anchors'], expected_anchors)
  np.testing.assert_allclose(outputs['final_anchors'],
                             [expected_anchors] * BATCH)
  # Decoding is anchor + 0.1 * code.
  np.testing.assert_allclose(
      outputs['raw_detection_boxes'],
      np.array(expected_anchors) + STDDEV * outputs['box_encodings'],
      rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(outputs['raw_detection_feature_map_indices'],
                                [[0, 0, 0, 0, 1]] * BATCH)


def test_predict_puts_extractor_variables_in_feature_extractor_scope():
  with tf.Graph().as_default():
    _build_model().predict(tf.zeros([1, 4, 4, 3]), None)
    names = sorted(v.op.name for v in tf.compat.v1.global_variables())
  assert names == ['BoxPredictor/conv_0/biases', 'BoxPredictor/conv_0/weights',
                   'FeatureExtractor/mock_model/layer1/biases',
                   'FeatureExtractor/mock_model/layer1/weights']


def test_anchors_and_tensor_names_need_predict():
  model = _build_model()
  with pytest.raises(RuntimeError, match='anchors'):
    _ = model.anchors
  with pytest.raises(RuntimeError, match='predict'):
    _ = model.batched_prediction_tensor_names


def test_background_flags_are_exclusive():
  with pytest.raises(ValueError, match='explicit_background_class'):
    _build_model(explicit_background_class=True)


# --- postprocess ----------------------------------------------------------

_BOX_CODES = np.zeros([BATCH, 4, 4], np.float32)
# Image 0, anchor 1 ([0, .5, .5, 1]) moves inwards by 0.1 on every side.
_BOX_CODES[0, 1] = [1.0, 1.0, -1.0, -1.0]
_LOGITS = np.full([BATCH, 4, NUM_CLASSES + 1], -5.0, np.float32)
_LOGITS[..., 0] = 0.0
_LOGITS[0, 0, 1] = 3.0   # class 0
_LOGITS[0, 1, 2] = 2.0   # class 1
_LOGITS[0, 3, 1] = 1.0   # class 0
_LOGITS[1, 2, 2] = 4.0   # class 1


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _postprocess(execute, true_image_shapes_list, model_kwargs=None,
                 logits=_LOGITS):
  """Postprocesses the hand-made predictions once per true shapes entry."""
  def graph(box_codes, class_logits, *true_image_shapes_tensors):
    model = _build_model(is_training=False, **(model_kwargs or {}))
    predictions = model.predict(tf.zeros([BATCH, 4, 4, 3]), None)
    predictions['box_encodings'] = box_codes
    predictions['class_predictions_with_background'] = class_logits
    return [model.postprocess(predictions, shapes)
            for shapes in true_image_shapes_tensors]
  return execute(graph, [_BOX_CODES, logits] + [
      np.array(shapes, np.int32) for shapes in true_image_shapes_list])


def test_postprocess_decodes_suppresses_and_clips(execute):
  # Second call: only the top half of each 4x4 image is real, window
  # [0, 0, 0.5, 1]. Anchor 3 (image 0) and anchor 2 (image 1) lie in the
  # bottom half, clip to zero height and are dropped.
  out, clipped = _postprocess(execute, [[[4, 4, 3]] * BATCH,
                                        [[2, 4, 3]] * BATCH])
  np.testing.assert_array_equal(clipped['num_detections'], [2., 0.])
  np.testing.assert_allclose(clipped['detection_boxes'][0, :2],
                             [fakes.QUADRANT_ANCHORS[0], [0.1, 0.6, 0.4, 0.9]],
                             atol=1e-6)
  anchors = np.array(fakes.QUADRANT_ANCHORS)
  moved = [0.1, 0.6, 0.4, 0.9]  # anchor 1 + 0.1 * [1, 1, -1, -1]
  # Scores above the 0.5 threshold, best first: sigmoid(3), sigmoid(2),
  # sigmoid(1) in image 0; sigmoid(4) in image 1. Empty slots are zero.
  np.testing.assert_allclose(out['detection_boxes'][0],
                             [anchors[0], moved, anchors[3], [0] * 4],
                             atol=1e-6)
  np.testing.assert_allclose(out['detection_boxes'][1],
                             [anchors[2], [0] * 4, [0] * 4, [0] * 4],
                             atol=1e-6)
  np.testing.assert_allclose(out['detection_scores'], [
      [_sigmoid(3.), _sigmoid(2.), _sigmoid(1.), 0.],
      [_sigmoid(4.), 0., 0., 0.]], rtol=1e-5)
  np.testing.assert_array_equal(out['detection_classes'][:, :3],
                                [[0, 1, 0], [1, 0, 0]])
  np.testing.assert_array_equal(out['num_detections'], [3., 1.])
  np.testing.assert_array_equal(out['detection_anchor_indices'][0, :3],
                                [0, 1, 3])
  assert out['detection_anchor_indices'][1, 0] == 2
  # Multiclass scores keep the background column.
  np.testing.assert_allclose(out['detection_multiclass_scores'][0, :3],
                             _sigmoid(_LOGITS[0, [0, 1, 3]]), rtol=1e-5)
  expected_raw_boxes = np.tile(anchors, [BATCH, 1, 1])
  expected_raw_boxes[0, 1] = moved
  np.testing.assert_allclose(out['raw_detection_boxes'], expected_raw_boxes,
                             atol=1e-6)
  np.testing.assert_allclose(out['raw_detection_scores'], _sigmoid(_LOGITS),
                             rtol=1e-5)


def test_postprocess_without_background_class_scores_every_column(execute):
  logits = _LOGITS[..., 1:]  # no background column at all
  out, = _postprocess(execute, [[[4, 4, 3]] * BATCH],
                      dict(add_background_class=False,
                           predictor_background=False), logits=logits)
  np.testing.assert_array_equal(out['num_detections'], [3., 1.])
  np.testing.assert_array_equal(out['detection_classes'][:, :3],
                                [[0, 1, 0], [1, 0, 0]])


def test_postprocess_needs_predictions():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='expected entries'):
      _build_model().postprocess({'box_encodings': tf.zeros([1, 4, 4])},
                                 None)


# --- loss -----------------------------------------------------------------

# Image 0: one box overlapping anchor 0 with IOU 0.25 / 0.3 = 0.83 (anchor 1:
# 0.05 / 0.5 = 0.1, unmatched); its code w.r.t. anchor 0 is
# ([0, 0, .5, .6] - [0, 0, .5, .5]) / 0.1 = [0, 0, 0, 1].
# Image 1: one box equal to anchor 3 (code 0), class 1.
_GT_BOXES = [np.array([[0.0, 0.0, 0.5, 0.6]], np.float32),
             np.array([[0.5, 0.5, 1.0, 1.0]], np.float32)]
_GT_CLASSES = [np.array([[1.0, 0.0]], np.float32),
               np.array([[0.0, 1.0]], np.float32)]
_PRED_CODES = np.random.RandomState(1).uniform(
    -1, 1, [BATCH, 4, 4]).astype(np.float32)
_PRED_CODES[0, 0] = [0.0, 0.0, 0.0, 2.5]  # diff 1.5: huber 1.5 - 0.5 = 1.0
_PRED_CODES[1, 3] = [0.4, 0.0, 0.0, 0.0]  # diff 0.4: huber 0.5 * 0.16
_LOC_SUM = 1.0 + 0.08  # unmatched anchors have zero regression weight
_PRED_LOGITS = np.random.RandomState(2).uniform(
    -3, 3, [BATCH, 4, NUM_CLASSES + 1]).astype(np.float32)
# One-hot targets with background at column 0.
_CLS_TARGETS = np.zeros([BATCH, 4, NUM_CLASSES + 1], np.float32)
_CLS_TARGETS[:, :, 0] = 1.0
_CLS_TARGETS[0, 0] = [0.0, 1.0, 0.0]
_CLS_TARGETS[1, 3] = [0.0, 0.0, 1.0]
_POSITIVES = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], bool)


def _sigmoid_cross_entropy(logits, labels):
  return (np.maximum(logits, 0) - logits * labels +
          np.log1p(np.exp(-np.abs(logits))))


_CE = _sigmoid_cross_entropy(_PRED_LOGITS, _CLS_TARGETS)  # [B, A, C + 1]


def _loss(execute, gt_boxes=_GT_BOXES, gt_classes=_GT_CLASSES,
          gt_weights=None, gt_confidences=None, **model_kwargs):
  """Runs loss() on _PRED_CODES / _PRED_LOGITS; returns (loc, cls)."""
  groundtruth = {'boxes': gt_boxes, 'classes': gt_classes,
                 'weights': gt_weights, 'confidences': gt_confidences}
  names = [name for name, value in groundtruth.items() if value is not None]

  def graph(codes, logits, *flat_groundtruth):
    model = _build_model(**model_kwargs)
    predictions = model.predict(tf.zeros([BATCH, 4, 4, 3]), None)
    predictions['box_encodings'] = codes
    predictions['class_predictions_with_background'] = logits
    lists = {name: list(flat_groundtruth[i * BATCH:(i + 1) * BATCH])
             for i, name in enumerate(names)}
    model.provide_groundtruth(
        lists['boxes'], lists['classes'],
        groundtruth_weights_list=lists.get('weights'),
        groundtruth_confidences_list=lists.get('confidences'))
    loss_dict = model.loss(predictions, None)
    assert sorted(loss_dict) == ['Loss/classification_loss',
                                 'Loss/localization_loss']
    return (loss_dict['Loss/localization_loss'],
            loss_dict['Loss/classification_loss'])
  inputs = [_PRED_CODES, _PRED_LOGITS]
  for name in names:
    inputs += list(groundtruth[name])
  return execute(graph, inputs)


def test_loss_matches_numpy_reference(execute):
  loc, cls = _loss(execute)
  # Two matched anchors normalize both losses.
  np.testing.assert_allclose(loc, _LOC_SUM / 2, rtol=1e-5)
  np.testing.assert_allclose(cls, _CE.sum() / 2, rtol=1e-5)


def test_loss_with_padded_groundtruth_equals_unpadded(execute):
  # Image 1 gets an all-zero padding row with weight 0; it never matches.
  boxes = [_GT_BOXES[0], np.concatenate([_GT_BOXES[1], np.zeros([1, 4])])
           .astype(np.float32)]
  classes = [_GT_CLASSES[0], np.concatenate([_GT_CLASSES[1],
                                             np.zeros([1, 2])])
             .astype(np.float32)]
  weights = [np.ones([1], np.float32), np.array([1.0, 0.0], np.float32)]
  loc, cls = _loss(execute, boxes, classes, gt_weights=weights)
  np.testing.assert_allclose(loc, _LOC_SUM / 2, rtol=1e-5)
  np.testing.assert_allclose(cls, _CE.sum() / 2, rtol=1e-5)


def test_loss_weights_and_normalizers(execute):
  loc, cls = _loss(execute, classification_loss_weight=0.5,
                   localization_loss_weight=2.0,
                   normalize_loc_loss_by_codesize=True)
  # Localization: weight 2 / (2 matches * code size 4).
  np.testing.assert_allclose(loc, 2.0 * _LOC_SUM / (2 * 4), rtol=1e-5)
  np.testing.assert_allclose(cls, 0.5 * _CE.sum() / 2, rtol=1e-5)
  loc, cls = _loss(execute, normalize_loss_by_num_matches=False)
  np.testing.assert_allclose(loc, _LOC_SUM, rtol=1e-5)
  np.testing.assert_allclose(cls, _CE.sum(), rtol=1e-5)


@pytest.mark.parametrize('encode_background_as_zeros', [False, True])
def test_loss_with_empty_groundtruth(execute, encode_background_as_zeros):
  empty_boxes = [np.zeros([0, 4], np.float32)] * BATCH
  empty_classes = [np.zeros([0, NUM_CLASSES], np.float32)] * BATCH
  loc, cls = _loss(execute, empty_boxes, empty_classes,
                   encode_background_as_zeros=encode_background_as_zeros)
  targets = np.zeros_like(_CLS_TARGETS)
  if not encode_background_as_zeros:
    targets[:, :, 0] = 1.0
  # No matches: the normalizer is max(0, 1) = 1.
  assert loc == 0.0
  np.testing.assert_allclose(
      cls, _sigmoid_cross_entropy(_PRED_LOGITS, targets).sum(), rtol=1e-5)


def test_loss_with_hard_example_mining(execute):
  miner = losses.HardExampleMiner(num_hard_examples=None, iou_threshold=1.0,
                                  loss_type='cls', max_negatives_per_positive=1)
  loc, cls = _loss(execute, hard_example_miner=miner)
  # Per image: all anchors ranked by classification loss (IOU threshold 1
  # suppresses nothing); keep the positive and the first 1 * 1 negative.
  per_anchor = _CE.sum(axis=2)
  expected_cls = 0.0
  for image in range(BATCH):
    order = np.argsort(-per_anchor[image])
    negatives = [a for a in order if not _POSITIVES[image, a]]
    expected_cls += per_anchor[image][_POSITIVES[image]].sum()
    expected_cls += per_anchor[image, negatives[0]]
  np.testing.assert_allclose(loc, _LOC_SUM / 2, rtol=1e-5)
  np.testing.assert_allclose(cls, expected_cls / 2, rtol=1e-5)


def test_loss_with_random_example_sampler(execute):
  # The fake sampler keeps positives only (background bits are not
  # positives), so only matched anchors enter the classification loss.
  loc, cls = _loss(execute, random_example_sampler=fakes.FakeExampleSampler())
  np.testing.assert_allclose(loc, _LOC_SUM / 2, rtol=1e-5)
  np.testing.assert_allclose(cls, _CE[_POSITIVES].sum() / 2, rtol=1e-5)


def test_loss_with_balanced_sampler_counts_only_sampled_anchors(execute):
  # Fraction 0.5 with one positive per image: each image keeps its positive
  # and one of its three negatives, chosen at random.
  sampler = balanced_positive_negative_sampler.BalancedPositiveNegativeSampler(
      positive_fraction=0.5)
  per_anchor = _CE.sum(axis=2)
  negatives = [per_anchor[image][~_POSITIVES[image]] for image in range(BATCH)]
  possible = {round(float(per_anchor[_POSITIVES].sum() + first + second) / 2,
                    4) for first in negatives[0] for second in negatives[1]}
  loc, cls = _loss(execute, random_example_sampler=sampler)
  # The two sampled positives still normalize both losses.
  np.testing.assert_allclose(loc, _LOC_SUM / 2, rtol=1e-5)
  assert round(float(cls), 4) in possible, (cls, possible)
  assert cls < _CE.sum() / 2  # Unsampled negatives are left out.


def test_loss_with_expected_loss_weights_fn(execute):
  def all_foreground(batch_cls_targets):
    # Targets arrive as [batch, anchors * classes, 2] for per-class losses.
    weights_shape = tf.shape(batch_cls_targets)[:2]
    return tf.ones(weights_shape), tf.zeros(weights_shape)
  loc, cls = _loss(execute, expected_loss_weights_fn=all_foreground)
  # Classification is unchanged; the localization loss is tiled once per
  # class column (3) before weighting.
  np.testing.assert_allclose(loc, 3 * _LOC_SUM / 2, rtol=1e-5)
  np.testing.assert_allclose(cls, _CE.sum() / 2, rtol=1e-5)


def test_loss_with_confidences_as_targets(execute):
  # One-hot confidences with implicit weight 1 give the one-hot targets.
  loc, cls = _loss(execute, gt_confidences=_GT_CLASSES,
                   use_confidences_as_targets=True,
                   implicit_example_weight=1.0)
  np.testing.assert_allclose(loc, _LOC_SUM / 2, rtol=1e-5)
  np.testing.assert_allclose(cls, _CE.sum() / 2, rtol=1e-5)


def test_loss_needs_groundtruth():
  with tf.Graph().as_default():
    model = _build_model()
    predictions = model.predict(tf.zeros([1, 4, 4, 3]), None)
    with pytest.raises(RuntimeError, match='not provided'):
      model.loss(predictions, None)


# --- restore_map, batch norm, regularization ------------------------------


def _variables_after_predict(model):
  model.predict(tf.zeros([1, 4, 4, 3]), None)
  return {v.op.name: v for v in tf.compat.v1.global_variables()}


def test_restore_map_detection():
  with tf.Graph().as_default():
    model = _build_model()
    variables = _variables_after_predict(model)
    restore = model.restore_map('detection')
    assert sorted(restore) == ['FeatureExtractor/mock_model/layer1/biases',
                               'FeatureExtractor/mock_model/layer1/weights']
    assert all(restore[name] is variables[name] for name in restore)
    assert model.restore_map(
        'detection', load_all_detection_checkpoint_vars=True) == variables


def test_restore_map_classification_strips_scope():
  with tf.Graph().as_default():
    model = _build_model()
    variables = _variables_after_predict(model)
    restore = model.restore_map('classification')
    assert sorted(restore) == ['mock_model/layer1/biases',
                               'mock_model/layer1/weights']
    assert restore['mock_model/layer1/weights'] is variables[
        'FeatureExtractor/mock_model/layer1/weights']
    with pytest.raises(ValueError, match='fine_tune_checkpoint_type'):
      model.restore_map('full')


@pytest.mark.parametrize('is_training,freeze,inplace,num_updates', [
    (True, False, False, 2),   # moving mean and variance
    (True, True, False, 0),    # frozen: batch norm in inference mode
    (True, False, True, 0),    # updated in place, not collected
    (False, False, False, 0),
])
def test_batch_norm_updates(is_training, freeze, inplace, num_updates):
  with tf.Graph().as_default():
    model = _build_model(is_training=is_training, use_batch_norm=True,
                         freeze_batchnorm=freeze,
                         inplace_batchnorm_update=inplace)
    model.predict(tf.zeros([1, 4, 4, 3]), None)
    assert len(model.updates()) == num_updates


def test_inplace_batch_norm_update_runs_with_the_features():
  with tf.Graph().as_default():
    model = _build_model(use_batch_norm=True, inplace_batchnorm_update=True)
    feature_map = model.predict(tf.ones([1, 4, 4, 3]), None)['feature_maps'][0]
    moving_mean = [v for v in tf.compat.v1.global_variables()
                   if v.op.name.endswith('BatchNorm/moving_mean')][0]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      np.testing.assert_array_equal(sess.run(moving_mean), np.zeros([8]))
      sess.run(feature_map)
      # The batch mean of a constant conv output is non-zero in general,
      # and moving_mean moved towards it: (1 - decay) * batch mean.
      assert np.abs(sess.run(moving_mean)).max() > 0


@pytest.mark.parametrize('freeze', [False, True])
def test_frozen_batch_norm_uses_moving_statistics(execute, freeze):
  def graph(images):
    model = _build_model(use_batch_norm=True, freeze_batchnorm=freeze)
    feature_map = model.predict(images, None)['feature_maps'][0]
    weights = [v for v in tf.compat.v1.global_variables()
               if v.op.name == 'FeatureExtractor/mock_model/layer1/weights']
    return feature_map, weights[0]
  # All-ones input: the 1x1 conv (no bias under batch norm) gives
  # sum_c W[c, k] everywhere. Training-mode batch norm normalizes this
  # constant to 0; frozen batch norm uses the initial moving statistics
  # (mean 0, variance 1): x / sqrt(1 + 0.001). Then ReLU.
  feature_map, weights = execute(graph, [np.ones([1, 4, 4, 3], np.float32)])
  conv = weights[0, 0].sum(axis=0)
  expected = np.maximum(conv / np.sqrt(1.001), 0) if freeze else 0 * conv
  np.testing.assert_allclose(feature_map, np.broadcast_to(expected,
                                                          [1, 2, 2, 8]),
                             rtol=1e-4, atol=1e-5)


def test_regularization_losses():
  def hyperparams():
    with slim.arg_scope([slim.conv2d],
                        weights_regularizer=slim.l2_regularizer(0.5)) as scope:
      return scope
  with tf.Graph().as_default():
    model = _build_model(conv_hyperparams_fn=hyperparams)
    assert model.regularization_losses() == []
    model.predict(tf.zeros([1, 4, 4, 3]), None)
    assert len(model.regularization_losses()) == 1


def test_reexports_feature_extractor_base():
  assert (ssd_meta_arch.SSDFeatureExtractor is
          ssd_feature_extractor.SSDFeatureExtractor)
