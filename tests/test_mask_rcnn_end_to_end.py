"""A tiny real Mask R-CNN end to end: model_main trains it until it overfits
a small set with PNG masks and evaluates it with the COCO box and mask
metrics, exporter exports detection_masks, and the export equals
Estimator.predict.

tests/tiny_mask_rcnn.py's model (64x64, 8 proposals, 8x8 masks; the tiny
ResNet of tests/tiny_resnet.py) on tiny_mask_rcnn.write_overfit_config's
set: the Faster R-CNN end to end's recipe (two images of one large shape, a
circle and a square, evaluated on the same record; heads trained
OVERFIT_STEPS Adam steps on a calibrated stand-in backbone) with the mask
head trained too and the shapes' own masks; the run is
tests/trained_models.py's overfit_mask_rcnn. Measured in 6 runs with
ResNet-50: DetectionMasks_Precision/mAP@.50IOU 1.0 each time
(DetectionMasks_Precision/mAP 0.40 to 0.85), boxes' mAP@.50IOU 1.0; with the
tiny ResNet, seeds 1 and 2: 0.75 and 1.0 for both.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import event_tags
from tests import test_faster_rcnn_end_to_end as end_to_end
from tests import tiny_mask_rcnn

TOLERANCE = end_to_end.TOLERANCE


pytestmark = pytest.mark.usefixtures('tiny_resnet_extractors')


@pytest.fixture(scope='module')
def trained(overfit_mask_rcnn):
  """model_main's run of OVERFIT_STEPS steps and evaluation; its paths."""
  return overfit_mask_rcnn


def test_model_main_trains_and_evaluates_masks(trained):
  assert trained['checkpoint'].endswith('-%d' % end_to_end.OVERFIT_STEPS)
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  assert 'Loss/BoxClassifierLoss/mask_loss' in train_tags, sorted(train_tags)
  eval_tags = event_tags.scalar_tags(
      os.path.join(trained['model_dir'], 'eval_0'))
  for tag in ('DetectionMasks_Precision/mAP', 'DetectionMasks_Recall/AR@100',
              'DetectionBoxes_Precision/mAP',
              'Loss/BoxClassifierLoss/mask_loss', 'Loss/total_loss'):
    assert tag in eval_tags, (tag, sorted(eval_tags))


def test_model_main_overfits_boxes_and_masks(trained):
  metrics = event_tags.last_scalars(
      os.path.join(trained['model_dir'], 'eval_0'))
  assert metrics['DetectionBoxes_Precision/mAP@.50IOU'] > 0.5, metrics
  assert metrics['DetectionMasks_Precision/mAP@.50IOU'] > 0.5, metrics


def test_mask_head_trained(trained):
  """update_trainable_variables ("Predictor") reaches the mask convolutions."""
  reader = tf.train.load_checkpoint(trained['checkpoint'])
  names = reader.get_variable_to_shape_map()
  for conv in ('Conv', 'Conv_1'):
    assert 'SecondStageBoxPredictor/%s/weights/Adam' % conv in names, (
        sorted(names))


def test_export_masks_equal_estimator_predict(trained, tmp_path):
  # The square, whose box ends away from the image's far edges (see below).
  shapes = end_to_end.overfit_image(trained, 1)
  served, predicted = end_to_end.export_and_predict(
      trained, shapes, str(tmp_path / 'export'))
  size = tiny_mask_rcnn.MASK_SIZE
  assert served['detection_masks'].shape == (1, 10, size, size)
  assert served['detection_masks'].dtype == np.float32
  assert ((served['detection_masks'] >= 0) &
          (served['detection_masks'] <= 1)).all()
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key], atol=TOLERANCE,
                               err_msg=key)
  assert served['num_detections'][0] > 0
  # A box ending at the image's right or bottom edge puts its last crop
  # sample at the feature map's last pixel, where crop_and_resize gives the
  # extrapolation value 0 once the sample lands a float32 ulp beyond it
  # (x1 * (W - 1) + 5 * ((1 - x1) * (W - 1) / 5) is 3.0 or 3.0000002 for
  # xmin values 1e-7 apart, as the two graphs compute them): such masks may
  # differ by a few hundredths. The others must be equal.
  inside = (served['detection_boxes'][..., 2:] < 1.0).all(axis=-1)
  assert inside[0, 0], served['detection_boxes']
  np.testing.assert_allclose(served['detection_masks'][inside],
                             predicted['detection_masks'][inside],
                             atol=TOLERANCE, err_msg='detection_masks')
  frozen = tmp_path / 'export' / 'frozen_inference_graph.pb'
  graph_def = tf.compat.v1.GraphDef()
  graph_def.ParseFromString(frozen.read_bytes())
  assert 'detection_masks' in {node.name for node in graph_def.node}
