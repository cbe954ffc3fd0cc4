"""FasterRCNNMetaArch with tiny fakes.

Images are 32x32, the fake extractor's first stage has stride 16 (a 2x2
feature map), grid anchors are 16x16 squares of one scale and aspect ratio
(base size 16, stride 16, offset 8): the four quadrants of the image. The
second stage is a 1x1 conv and a mean-pooling fully connected predictor.
"""
import dataclasses
import functools

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import image_resizing
from od_estimator.core import losses
from od_estimator.meta_architectures import faster_rcnn_meta_arch as arch
from tests import fakes
from tests import fast_graphs
from tests import plain_session
from tests.meta_architectures import faster_rcnn_parts as parts

NUM_CLASSES = parts.NUM_CLASSES
BATCH = 2
IMAGE_SIZE = parts.IMAGE_SIZE
MAX_PROPOSALS = parts.MAX_PROPOSALS
SECOND_STAGE_BATCH = parts.SECOND_STAGE_BATCH
MASK_SIZE = parts.MASK_SIZE
# Two quadrant boxes, one per class, in each image (normalized).
GT_BOXES = [[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]],
            [[0.0, 0.5, 0.5, 1.0], [0.5, 0.0, 1.0, 0.5]]]
GT_CLASSES = [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]]


def _build_model(is_training=True, number_of_stages=2,
                 use_static_shapes=False, hard_example_miner=None,
                 clip_anchors_to_image=False, anchor_size=16):
  """A FasterRCNNMetaArch of tiny parts at 32x32 pixels (3 stages: Mask
  R-CNN with the real second-stage predictor)."""
  classifier = branch = None
  if number_of_stages > 1:
    classifier, branch = parts.second_stage_parts(
        is_training, use_static_shapes, hard_example_miner,
        with_masks=number_of_stages == 3)
  return arch.FasterRCNNMetaArch(
      is_training,
      fakes.FakeFasterRCNNFeatureExtractor(is_training,
                                           first_stage_features_stride=16),
      arch.ModelParams(
          num_classes=NUM_CLASSES,
          image_resizer_fn=functools.partial(
              image_resizing.resize_image, new_height=IMAGE_SIZE,
              new_width=IMAGE_SIZE),
          number_of_stages=number_of_stages,
          use_static_shapes=use_static_shapes),
      parts.rpn(is_training, use_static_shapes, clip_anchors_to_image,
                anchor_size),
      classifier, branch)


def _images():
  return tf.random.uniform([BATCH, IMAGE_SIZE, IMAGE_SIZE, 3], 0, 255,
                           seed=1)


def _object_images():
  """[BATCH, 32, 32, 3] float32: white groundtruth boxes on black."""
  images = np.zeros([BATCH, IMAGE_SIZE, IMAGE_SIZE, 3], np.float32)
  for image, boxes in zip(images, GT_BOXES):
    for ymin, xmin, ymax, xmax in np.asarray(boxes) * IMAGE_SIZE:
      image[int(ymin):int(ymax), int(xmin):int(xmax)] = 255.0
  return images


def _groundtruth_masks():
  """[BATCH, 2, 32, 32] float32: each groundtruth box filled."""
  masks = np.zeros([BATCH, 2, IMAGE_SIZE, IMAGE_SIZE], np.float32)
  for image_masks, boxes in zip(masks, GT_BOXES):
    for mask, box in zip(image_masks, np.asarray(boxes) * IMAGE_SIZE):
      mask[int(box[0]):int(box[2]), int(box[1]):int(box[3])] = 1.0
  return masks


def _provide_groundtruth(model):
  model.provide_groundtruth(
      [tf.constant(boxes, tf.float32) for boxes in GT_BOXES],
      [tf.constant(classes, tf.float32) for classes in GT_CLASSES],
      groundtruth_masks_list=[tf.constant(masks)
                              for masks in _groundtruth_masks()])


def _predict(model, images=None):
  preprocessed, true_image_shapes = model.preprocess(
      _images() if images is None else images)
  return model.predict(preprocessed, true_image_shapes), true_image_shapes


@pytest.mark.parametrize('is_training', [True, False])
def test_first_stage_only_predict_and_postprocess(execute, is_training):
  def graph_fn():
    model = _build_model(is_training=is_training, number_of_stages=1)
    prediction_dict, true_image_shapes = _predict(model)
    return prediction_dict, model.postprocess(prediction_dict,
                                              true_image_shapes)

  prediction_dict, detections = execute(graph_fn)
  assert prediction_dict['rpn_box_encodings'].shape == (BATCH, 4, 4)
  assert prediction_dict[
      'rpn_objectness_predictions_with_background'].shape == (BATCH, 4, 2)
  assert prediction_dict['rpn_features_to_crop'].shape == (BATCH, 2, 2, 8)
  np.testing.assert_allclose(
      prediction_dict['anchors'],
      [[0, 0, 16, 16], [0, 16, 16, 32], [16, 0, 32, 16], [16, 16, 32, 32]])
  assert 'refined_box_encodings' not in prediction_dict
  assert detections['detection_boxes'].shape == (BATCH, MAX_PROPOSALS, 4)
  assert detections['detection_multiclass_scores'].shape == (
      BATCH, MAX_PROPOSALS, 2)
  assert np.all(detections['detection_classes'] == 0)
  assert np.all(detections['detection_boxes'] >= 0.0)
  assert np.all(detections['detection_boxes'] <= 1.0)
  assert np.all(detections['num_detections'] >= 1)
  assert detections['raw_detection_boxes'].shape == (BATCH, 4, 4)


def _train(number_of_stages, steps=0, values=None, every_roi=False):
  """A training graph on the object images: first values, then Adam steps.

  Args:
    number_of_stages: the model's (3: Mask R-CNN).
    steps: Adam steps to run after the first values.
    values: {variable name: value} to load before the first values.
    every_roi: run the mask head on every sampled proposal (the path of mask
      heads with batch statistics) instead of the weighted ones only.

  Returns:
    {'losses', 'predictions', 'gradients', 'values'} before any step (the
    gradients and values by variable name), 'names' (all variables before
    the optimizer's) and 'last' (the losses after the steps, or None).
  """
  with fast_graphs.new_graph():
    tf.compat.v1.set_random_seed(5)
    model = _build_model(number_of_stages=number_of_stages)
    if every_roi:
      model.mask_branch.rois_are_independent = lambda: False
    _provide_groundtruth(model)
    prediction_dict, true_image_shapes = _predict(
        model, tf.constant(_object_images()))
    loss_dict = model.loss(prediction_dict, true_image_shapes)
    variables = tf.compat.v1.trainable_variables()
    gradients = tf.gradients(tf.add_n(list(loss_dict.values())), variables)
    names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    if steps:
      train_op = tf.compat.v1.train.AdamOptimizer(0.05).apply_gradients(
          zip(gradients, variables))
    with plain_session.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for variable in variables if values else []:
        variable.load(values[variable.op.name], sess)
      result = sess.run({
          'losses': loss_dict, 'predictions': prediction_dict,
          'gradients': {v.op.name: g for v, g in zip(variables, gradients)},
          'values': {v.op.name: v for v in variables}})
      for _ in range(steps):
        sess.run(train_op)
      result['last'] = sess.run(loss_dict) if steps else None
  result['names'] = names
  return result


@functools.lru_cache(maxsize=None)
def _trained(number_of_stages):
  """_train's 10 steps of each stage count, shared by the module's tests."""
  return _train(number_of_stages, steps=10)


@functools.lru_cache(maxsize=None)
def _two_stage_inference():
  """(predictions, detections) of the two-stage model at inference."""
  with fast_graphs.new_graph():
    model = _build_model(is_training=False)
    _provide_groundtruth(model)
    prediction_dict, true_image_shapes = _predict(model)
    detections = model.postprocess(prediction_dict, true_image_shapes)
    with plain_session.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return sess.run((prediction_dict, detections))


@pytest.mark.parametrize('is_training', [True, False])
def test_two_stage_predict_shapes(is_training):
  prediction_dict = (_trained(2)['predictions'] if is_training else
                     _two_stage_inference()[0])
  num_proposals = SECOND_STAGE_BATCH if is_training else MAX_PROPOSALS
  assert prediction_dict['refined_box_encodings'].shape == (
      BATCH * num_proposals, NUM_CLASSES, 4)
  assert prediction_dict['class_predictions_with_background'].shape == (
      BATCH * num_proposals, NUM_CLASSES + 1)
  assert prediction_dict['proposal_boxes'].shape == (BATCH, num_proposals, 4)
  assert prediction_dict['box_classifier_features'].shape == (
      BATCH * num_proposals, 2, 2, 6)
  assert np.all(prediction_dict['num_proposals'] <= num_proposals)
  assert np.all(prediction_dict['num_proposals'] >= 1)
  normalized = prediction_dict['proposal_boxes_normalized']
  np.testing.assert_allclose(normalized * IMAGE_SIZE,
                             prediction_dict['proposal_boxes'], atol=1e-4)


def test_proposals_are_decoded_anchors_after_nms(execute):
  """Zero box codes decode to the anchors; NMS keeps disjoint quadrants."""
  def graph_fn():
    model = _build_model(is_training=False, number_of_stages=1)
    anchors = tf.constant([[0, 0, 16, 16], [0, 16, 16, 32]], tf.float32)
    objectness = tf.constant([[[0.0, 2.0], [0.0, 1.0]]], tf.float32)
    return model.postprocess(
        {'rpn_box_encodings': tf.zeros([1, 2, 4]),
         'rpn_objectness_predictions_with_background': objectness,
         'anchors': anchors},
        tf.constant([[32, 32, 3]], tf.int32))

  detections = execute(graph_fn)
  assert detections['num_detections'][0] == 2
  np.testing.assert_allclose(detections['detection_boxes'][0, :2],
                             [[0, 0, 0.5, 0.5], [0, 0.5, 0.5, 1.0]],
                             atol=1e-5)
  np.testing.assert_allclose(detections['detection_scores'][0, :2],
                             [1 / (1 + np.exp(-2.0)), 1 / (1 + np.exp(-1.0))],
                             rtol=1e-5)


@pytest.mark.parametrize('number_of_stages', [1, 2, 3])
def test_losses_are_finite_and_decrease(number_of_stages):
  first, last = _trained(number_of_stages)['losses'], _trained(
      number_of_stages)['last']
  expected = {'Loss/RPNLoss/localization_loss',
              'Loss/RPNLoss/objectness_loss'}
  if number_of_stages > 1:
    expected |= {'Loss/BoxClassifierLoss/localization_loss',
                 'Loss/BoxClassifierLoss/classification_loss'}
  if number_of_stages == 3:
    expected.add('Loss/BoxClassifierLoss/mask_loss')
    assert last['Loss/BoxClassifierLoss/mask_loss'] < first[
        'Loss/BoxClassifierLoss/mask_loss']
  assert set(first) == expected
  assert all(np.isfinite(value) for value in first.values())
  assert sum(last.values()) < sum(first.values())
  assert last['Loss/RPNLoss/objectness_loss'] < first[
      'Loss/RPNLoss/objectness_loss']


def test_postprocess_contract():
  detections = _two_stage_inference()[1]
  assert detections['detection_boxes'].shape == (BATCH, 5, 4)
  assert detections['detection_scores'].shape == (BATCH, 5)
  assert detections['detection_classes'].shape == (BATCH, 5)
  assert detections['num_detections'].shape == (BATCH,)
  assert detections['detection_multiclass_scores'].shape == (
      BATCH, 5, NUM_CLASSES + 1)
  assert detections['raw_detection_boxes'].shape == (BATCH, MAX_PROPOSALS, 4)
  assert detections['raw_detection_scores'].shape == (
      BATCH, MAX_PROPOSALS, NUM_CLASSES + 1)
  assert set(np.unique(detections['detection_classes'])) <= {0.0, 1.0}
  assert np.all((detections['raw_detection_boxes'] >= 0) &
                (detections['raw_detection_boxes'] <= 1))
  np.testing.assert_allclose(
      detections['raw_detection_scores'].sum(axis=-1), 1.0, rtol=1e-5)
  # Each detection's proposal (as the original's detection_anchor_indices):
  # the one whose scores it carries.
  indices = detections['detection_anchor_indices']
  assert indices.dtype == np.int32 and indices.shape == (BATCH, 5)
  for image, count in enumerate(detections['num_detections'].astype(int)):
    assert count > 0
    np.testing.assert_array_equal(
        detections['detection_multiclass_scores'][image, :count],
        detections['raw_detection_scores'][image, indices[image, :count]])


def test_hard_example_miner_sends_every_proposal(execute):
  def graph_fn():
    model = _build_model(hard_example_miner=losses.HardExampleMiner(
        num_hard_examples=2, iou_threshold=0.99))
    _provide_groundtruth(model)
    prediction_dict, true_image_shapes = _predict(model)
    return (prediction_dict['proposal_boxes'],
            model.loss(prediction_dict, true_image_shapes))

  proposal_boxes, loss_dict = execute(graph_fn)
  assert proposal_boxes.shape == (BATCH, MAX_PROPOSALS, 4)
  assert all(np.isfinite(value) for value in loss_dict.values())


@pytest.mark.parametrize('number_of_stages', [2, 3])
def test_static_shape_training_step_is_fully_static(number_of_stages):
  with fast_graphs.new_graph() as graph:
    model = _build_model(use_static_shapes=True, clip_anchors_to_image=True,
                         number_of_stages=number_of_stages)
    _provide_groundtruth(model)
    prediction_dict, true_image_shapes = _predict(model)
    loss_dict = model.loss(prediction_dict, true_image_shapes)
    total = tf.add_n(list(loss_dict.values()))
    tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(total)
  for op in graph.get_operations():
    for tensor in op.outputs:
      assert tensor.shape.is_fully_defined(), (op.type, tensor.name,
                                               tensor.shape)


def test_training_prunes_anchors_crossing_the_border(execute):
  """Anchors of 24 px around the quadrant centres cross the image border."""
  def graph_fn(clip):
    model = _build_model(clip_anchors_to_image=clip, anchor_size=24)
    _provide_groundtruth(model)
    return _predict(model)[0]['anchors']

  assert execute(lambda: graph_fn(False)).shape == (0, 4)
  clipped = execute(lambda: graph_fn(True))
  np.testing.assert_allclose(clipped[0], [0, 0, 20, 20])


def test_restore_maps(execute):
  with fast_graphs.new_graph():
    model = _build_model()
    _provide_groundtruth(model)
    _predict(model)
    classification = model.restore_map('classification')
    detection = model.restore_map('detection')
    everything = model.restore_map('detection',
                                   load_all_detection_checkpoint_vars=True)
    with pytest.raises(ValueError, match='fine_tune_checkpoint_type'):
      model.restore_map('segmentation')
  assert sorted(classification) == ['layer1/biases', 'layer1/weights',
                                    'layer2/biases', 'layer2/weights']
  assert sorted(detection) == [
      'FirstStageFeatureExtractor/layer1/biases',
      'FirstStageFeatureExtractor/layer1/weights',
      'SecondStageFeatureExtractor/layer2/biases',
      'SecondStageFeatureExtractor/layer2/weights']
  assert {'Conv/weights', 'FirstStageBoxPredictor/BoxEncodingPredictor/weights',
          'FirstStageBoxPredictor/ClassPredictor/weights',
          'SecondStageBoxPredictor/BoxEncodingPredictor/weights',
          'SecondStageBoxPredictor/ClassPredictor/weights'} <= set(everything)


def test_rejects_bad_stage_settings():
  def model(stages, classifier=None, branch=None):
    return arch.FasterRCNNMetaArch(
        True, fakes.FakeFasterRCNNFeatureExtractor(),
        arch.ModelParams(num_classes=NUM_CLASSES, image_resizer_fn=None,
                         number_of_stages=stages),
        parts.rpn(), classifier, branch)
  with fast_graphs.new_graph():
    with pytest.raises(ValueError, match='number_of_stages'):
      model(4)
    with pytest.raises(ValueError, match='number_of_stages 3 needs the RPN, '
                       'a box classifier and a mask branch'):
      model(3, *parts.second_stage_parts())
    with pytest.raises(ValueError, match='number_of_stages 1 needs the RPN'):
      model(1, *parts.second_stage_parts())
    with pytest.raises(ValueError, match='second_stage_batch_size'):
      model(2, parts.second_stage_parts(batch_size=MAX_PROPOSALS + 1)[0])


def test_mask_rcnn_training_predicts_masks_on_the_sampled_proposals():
  prediction_dict = _trained(3)['predictions']
  assert prediction_dict['mask_predictions'].shape == (
      BATCH * SECOND_STAGE_BATCH, NUM_CLASSES, MASK_SIZE, MASK_SIZE)
  assert 'detection_masks' not in prediction_dict
  assert [name for name in _trained(3)['names']
          if name.startswith('SecondStageBoxPredictor/Conv')] == [
              'SecondStageBoxPredictor/Conv/biases',
              'SecondStageBoxPredictor/Conv/weights',
              'SecondStageBoxPredictor/Conv_1/biases',
              'SecondStageBoxPredictor/Conv_1/weights']


def test_mask_rcnn_inference_predicts_masks_on_the_detections(execute):
  def graph_fn():
    model = _build_model(is_training=False, number_of_stages=3)
    _provide_groundtruth(model)
    prediction_dict, true_image_shapes = _predict(
        model, tf.constant(_object_images()))
    detections = model.postprocess(prediction_dict, true_image_shapes)
    two_stage = _build_model(is_training=False).postprocess(
        prediction_dict, true_image_shapes)
    return (prediction_dict, detections, two_stage,
            model.loss(prediction_dict, true_image_shapes))

  prediction_dict, detections, two_stage, losses_ = execute(graph_fn)
  # One mask per detection (5 per image), not per proposal (4).
  assert prediction_dict['mask_predictions'].shape == (
      BATCH * 5, NUM_CLASSES, MASK_SIZE, MASK_SIZE)
  masks = detections['detection_masks']
  assert masks.shape == (BATCH, 5, MASK_SIZE, MASK_SIZE)
  logits = prediction_dict['mask_predictions'].reshape(
      BATCH, 5, NUM_CLASSES, MASK_SIZE, MASK_SIZE)
  classes = detections['detection_classes'].astype(int)
  chosen = np.take_along_axis(logits, classes[:, :, None, None, None],
                              axis=2)[:, :, 0]
  np.testing.assert_allclose(masks, 1 / (1 + np.exp(-chosen)), rtol=1e-5)
  # The detections themselves are the box classifier's.
  for key, value in two_stage.items():
    np.testing.assert_allclose(detections[key], value, rtol=1e-5, err_msg=key)
  assert np.isfinite(losses_['Loss/BoxClassifierLoss/mask_loss'])


def test_mask_head_on_weighted_proposals_gives_the_same_loss_and_gradients():
  fast = _trained(3)
  full = _train(3, values=fast['values'], every_roi=True)
  fast_masks = fast['predictions']['mask_predictions']
  full_masks = full['predictions']['mask_predictions']
  rows_computed = np.any(fast_masks != 0, axis=(1, 2, 3))
  # Some but not all sampled proposals are positive: the others were skipped.
  assert 0 < rows_computed.sum() < len(rows_computed)
  assert np.all(np.any(full_masks != 0, axis=(1, 2, 3)))
  np.testing.assert_array_equal(fast_masks[rows_computed],
                                full_masks[rows_computed])
  assert fast['losses'] == full['losses']
  assert fast['losses']['Loss/BoxClassifierLoss/mask_loss'] > 0
  # Equal up to float rounding (~1e-8: the features' gradient sums the
  # mask head's part in another order); the mask head's own are identical.
  assert set(fast['gradients']) == set(full['gradients'])
  for name, gradient in fast['gradients'].items():
    np.testing.assert_allclose(gradient, full['gradients'][name], rtol=1e-6,
                               atol=1e-9, err_msg=name)


def test_output_final_box_features_are_the_detections_features():
  with fast_graphs.new_graph():
    plain = _build_model(is_training=False)
    model = arch.FasterRCNNMetaArch(
        False, plain.feature_extractor,
        dataclasses.replace(plain.params, output_final_box_features=True),
        plain.rpn, plain.box_classifier)
    preprocessed, true_shapes = model.preprocess(tf.constant(_object_images()))
    predictions = model.predict(preprocessed, true_shapes)
    detections = model.postprocess(predictions, true_shapes)
    features = detections['detection_features']
    pooled = tf.compat.v1.get_default_graph().get_tensor_by_name(
        'SecondStageDetectionFeaturesExtract/pooled_detection_features:0')
    # The same layers on the detection boxes, cropped again by hand.
    boxes = tf.compat.v1.placeholder(tf.float32, [BATCH, None, 4])
    expected = model.feature_extractor.extract_box_classifier_features(
        model.box_classifier.crop(predictions['rpn_features_to_crop'], boxes),
        scope=arch.SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      values, pooled_values, box_values = session.run(
          (features, pooled, detections['detection_boxes']))
      expected_values = session.run(expected, {boxes: box_values})
  # 5 detections; 4x4 crops max-pooled to 2x2; the fake's depth 6.
  assert values.shape == (BATCH, 5, 2, 2, 6)
  np.testing.assert_allclose(values.reshape(expected_values.shape),
                             expected_values, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(pooled_values, values.mean(axis=(2, 3)),
                             rtol=1e-5, atol=1e-6)
