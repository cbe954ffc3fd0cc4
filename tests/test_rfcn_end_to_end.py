"""A tiny real R-FCN end to end: model_main trains it until it overfits a
small set and evaluates it with COCO metrics, exporter exports it, and the
export's detections equal Estimator.predict's.

tests/tiny_rfcn.py's ResNet-50 model (64x64, 8 proposals, 2 x 2
position-sensitive bins) on the Faster R-CNN end to end's set and recipe
(tests/test_faster_rcnn_end_to_end.py): the run is tests/trained_models.py's
overfit_rfcn. The same model_fn, evaluation and export serve it as Faster
R-CNN. Measured once: DetectionBoxes_Precision/mAP@.50IOU 1.0 (mAP 0.55)
after OVERFIT_STEPS steps with the fixed seed.
"""
import os

import numpy as np
import pytest

from tests import event_tags
from tests import test_faster_rcnn_end_to_end as end_to_end


@pytest.fixture(scope='module')
def trained(overfit_rfcn):
  """model_main's run of OVERFIT_STEPS steps and evaluation; its paths."""
  return overfit_rfcn


def test_model_main_trains_evaluates_and_overfits(trained):
  assert trained['checkpoint'].endswith('-%d' % end_to_end.OVERFIT_STEPS)
  with open(trained['config']) as f:
    assert 'rfcn_box_predictor' in f.read()
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  for tag in ('Loss/BoxClassifierLoss/localization_loss',
              'Loss/BoxClassifierLoss/classification_loss',
              'Loss/RPNLoss/objectness_loss', 'Loss/total_loss'):
    assert tag in train_tags, (tag, sorted(train_tags))
  metrics = event_tags.last_scalars(
      os.path.join(trained['model_dir'], 'eval_0'))
  assert metrics['DetectionBoxes_Precision/mAP@.50IOU'] > 0.5, metrics


def test_export_detections_equal_estimator_predict(trained, tmp_path):
  image = end_to_end.overfit_image(trained)
  served, predicted = end_to_end.export_and_predict(
      trained, image, str(tmp_path / 'export'))
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key],
                               atol=end_to_end.TOLERANCE, err_msg=key)
  assert (served['num_detections'] > 0).all()
  # The overfitted shape (the set's first image: class 1) scores best.
  assert served['detection_classes'][0, 0] == 1.0
