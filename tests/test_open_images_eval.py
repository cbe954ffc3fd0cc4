"""Open Images metrics end to end: a tiny SSD evaluated with
metrics_set "oid_V2_detection_metrics" (and the challenge set) on records
whose group-of flags and image-level labels must reach the evaluators."""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.metrics import eval_util
from od_estimator.input_pipeline import inputs
from od_estimator.estimator import model_lib
from od_estimator.core import standard_fields as fields
from od_estimator.dataset_tools import create_synthetic_tf_record as synth
from od_estimator.config import config_util
from tests import tiny_ssd

_IN = fields.InputDataFields
NUM_EVAL_IMAGES = 3
# Verified image-level labels of each eval image (1-based shapes ids).
IMAGE_LABELS = ([2], [], [1, 3])


def _write_open_images_records(path):
  """Shapes images whose every box is a group-of box, with image labels."""
  rng = np.random.default_rng(5)
  with tf.io.TFRecordWriter(path) as writer:
    for index, labels in enumerate(IMAGE_LABELS):
      image, boxes, classes, masks = synth.make_image(rng, 64, 64, 2)
      example = synth.make_example(image, boxes, classes, masks, index)
      feature = example.features.feature
      feature['image/object/group_of'].int64_list.value.extend(
          [1] * len(classes))
      feature['image/class/label'].int64_list.value.extend(labels)
      writer.write(example.SerializeToString())


@pytest.fixture(scope='module')
def config_path(tmp_path_factory):
  root = tmp_path_factory.mktemp('open_images')
  path = tiny_ssd.write_config(root, root / 'data')
  records = str(root / 'open_images_val.record')
  _write_open_images_records(records)
  with open(path) as f:
    text = f.read()
  val = os.path.join(str(root / 'data'), 'shapes_val.record-*')
  text = text.replace(val, records).replace(
      'metrics_set: "coco_detection_metrics"',
      'metrics_set: "oid_V2_detection_metrics" '
      'metrics_set: "oid_challenge_detection_metrics" '
      'metrics_set: "pascal_voc_detection_metrics"')
  assert records in text
  with open(path, 'w') as f:
    f.write(text)
  return path


def test_group_of_and_image_labels_reach_the_eval_groundtruth(config_path):
  configs = config_util.get_configs_from_pipeline_file(config_path)
  input_fn = inputs.create_eval_input_fn(
      configs['eval_config'], configs['eval_input_configs'][0],
      configs['model'])
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        input_fn({'batch_size': NUM_EVAL_IMAGES})).get_next()
    del features
    groundtruth = eval_util.groundtruth_from_labels(
        model_lib.unstack_batch(labels), max_boxes=8)
    with tf.compat.v1.Session() as session:
      values = session.run(groundtruth)
  counts = values[_IN.num_groundtruth_boxes]
  for image, count in enumerate(counts):
    assert values[_IN.groundtruth_group_of][image, :count].all()
  labeled = values[_IN.groundtruth_labeled_classes]
  # Index = class id. The image without labels has every class verified
  # (eval_config.image_classes_field_map_empty_to_ones defaults to true).
  assert labeled.tolist() == [[0, 0, 1, 0], [0, 1, 1, 1], [0, 1, 0, 1]]


def test_tiny_ssd_evaluation_reports_the_originals_open_images_names(
    config_path, one_step_tiny_ssd, tmp_path):
  parts = model_lib.create_estimator_and_inputs(
      tf.estimator.RunConfig(model_dir=str(tmp_path / 'model')),
      hparams=config_util.parse_hparams_overrides(tiny_ssd.LIGHT_OVERRIDES),
      pipeline_config_path=config_path)
  # The same model (light tiny SSD, 3 classes) trained one step, read only.
  checkpoint = tf.train.latest_checkpoint(one_step_tiny_ssd[2])
  metrics = parts['estimator'].evaluate(
      parts['eval_input_fns'][0], steps=None, checkpoint_path=checkpoint)
  for prefix in ('OpenImagesV2_', 'OpenImagesDetectionChallenge_'):
    assert prefix + 'Precision/mAP@0.5IOU' in metrics
    for name in synth.CLASSES:
      assert prefix + 'PerformanceByCategory/AP@0.5IOU/' + (
          name.capitalize()) in metrics
  # Every box is a group-of box: V2 (group-of weight 0) has no groundtruth
  # at all, so every AP is NaN; PASCAL ignores the flag and the challenge
  # counts each group-of box once, so both have an AP.
  assert np.isnan(metrics['OpenImagesV2_Precision/mAP@0.5IOU'])
  assert np.isfinite(metrics['PascalBoxes_Precision/mAP@0.5IOU'])
  assert np.isfinite(
      metrics['OpenImagesDetectionChallenge_Precision/mAP@0.5IOU'])
