"""A tiny Faster R-CNN ResNet FPN end to end: model_main trains it until
it overfits a small set and evaluates it with COCO metrics, exporter exports
it, and the export's detections equal the Estimator's (its PREDICT graph,
as model_main's Servo export of the same checkpoint serves it:
tests/servo_exports.py).

tests/tiny_faster_rcnn_fpn.py's model (the sample FPN config's first stage,
pyramid levels 2..6 of 64x64 images, multiscale anchors, the FPN box head)
on the Keras ResNet FPN extractor with tests/tiny_resnet.py's one block per
stage, on the Faster R-CNN end to end's set
(tests/test_faster_rcnn_end_to_end.py): the run is
tests/trained_models.py's overfit_faster_rcnn_fpn, FPN_STEPS steps with the
fixed seed. Measured: DetectionBoxes_Precision/mAP@.50IOU 1.0 with seeds 1
and 2 on ResNet-50; 1.0 and 0.67 on the tiny ResNet.
"""
import numpy as np
import pytest

from tests import servo_exports
from tests import test_faster_rcnn_end_to_end as end_to_end
from tests import tiny_resnet
from tests import trained_models

pytestmark = pytest.mark.usefixtures('tiny_resnet_extractors')


def test_model_main_trains_evaluates_and_overfits(overfit_faster_rcnn_fpn):
  end_to_end.check_trains_evaluates_and_overfits(
      overfit_faster_rcnn_fpn, trained_models.FPN_STEPS, tiny_resnet.FPN_TYPE)
  with open(overfit_faster_rcnn_fpn['config']) as f:
    assert 'multiscale_anchor_generator' in f.read()


def test_export_detections_equal_estimator_predict(overfit_faster_rcnn_fpn,
                                                   tmp_path):
  """The image_tensor export's detections of the set's first image, the
  overfitted shape (class 1) first."""
  trained = overfit_faster_rcnn_fpn
  image = end_to_end.overfit_image(trained)
  served = end_to_end.export_and_serve(trained, image,
                                       str(tmp_path / 'export'))
  predicted = servo_exports.predictions(trained['model_dir'], image[0],
                                        trained_models.FPN_STEPS)
  for key in ('detection_boxes', 'detection_scores', 'detection_classes',
              'num_detections'):
    np.testing.assert_allclose(served[key], predicted[key],
                               atol=end_to_end.TOLERANCE, err_msg=key)
  assert (served['num_detections'] > 0).all()
  assert served['detection_classes'][0, 0] == 1.0
  # As the original's TF1 exports: no detection_anchor_indices (its TF2
  # exports have them: test_faster_rcnn_keras_end_to_end).
  assert 'detection_anchor_indices' not in served
