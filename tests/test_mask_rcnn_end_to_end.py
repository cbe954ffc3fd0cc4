"""A tiny real Mask R-CNN end to end: model_main trains it on generated
shapes with PNG masks and evaluates it with coco_mask_metrics, exporter
exports detection_masks, and the export equals Estimator.predict.

tests/tiny_mask_rcnn.py's ResNet-50 model (64x64, 8 proposals, 8x8 masks)
fine-tuned for two steps from a stand-in classification checkpoint.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import event_tags
from tests import image_inputs
from tests import test_faster_rcnn_end_to_end as end_to_end
from tests import tiny_mask_rcnn

TOLERANCE = end_to_end.TOLERANCE


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """model_main trains two steps and evaluates; returns the paths."""
  return end_to_end.train_with_model_main(
      tmp_path_factory.mktemp('mask_rcnn'), tiny_mask_rcnn.write_config)


def test_model_main_trains_and_evaluates_masks(trained):
  assert trained['checkpoint'].endswith('-%d' % end_to_end.TRAIN_STEPS)
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  assert 'Loss/BoxClassifierLoss/mask_loss' in train_tags, sorted(train_tags)
  eval_tags = event_tags.scalar_tags(
      os.path.join(trained['model_dir'], 'eval_0'))
  for tag in ('DetectionMasks_Precision/mAP', 'DetectionMasks_Recall/AR@100',
              'Loss/BoxClassifierLoss/mask_loss', 'Loss/total_loss'):
    assert tag in eval_tags, (tag, sorted(eval_tags))


def test_export_masks_equal_estimator_predict(trained):
  served, predicted = end_to_end.export_and_predict(
      trained, image_inputs.images()[:1])
  size = tiny_mask_rcnn.MASK_SIZE
  assert served['detection_masks'].shape == (1, 10, size, size)
  assert served['detection_masks'].dtype == np.float32
  assert ((served['detection_masks'] >= 0) &
          (served['detection_masks'] <= 1)).all()
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections', 'detection_masks'):
    np.testing.assert_allclose(served[key], predicted[key], atol=TOLERANCE,
                               err_msg=key)
  assert served['num_detections'][0] > 0
  frozen, = trained['root'].glob('export*/frozen_inference_graph.pb')
  graph_def = tf.compat.v1.GraphDef()
  graph_def.ParseFromString(frozen.read_bytes())
  assert 'detection_masks' in {node.name for node in graph_def.node}
