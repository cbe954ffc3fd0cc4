"""samples/scripts/run_inference_tutorial.py and evaluate_coco_detections.py
on a tiny exported Mask R-CNN: the tutorial's loop pastes, draws and
exports the masks, and coco_tools evaluates the exported detections.

The model (tests' fake 1x1-conv backbone) is exported untrained: its
detections are arbitrary, but score_threshold 0 keeps 10 per image, which
is all the scripts need.
"""
import json
import os

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
import pytest
import tensorflow as tf

from od_estimator.compat import coco_export
from od_estimator.compat import ops
from od_estimator.export import exporter
from od_estimator.builders import model_builder
from od_estimator.metrics import coco_tools
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.config import config_util
from tests import fakes
from tests import tiny_mask_rcnn
from tests.samples import sample_scripts

IMAGES = {'first': (48, 40), 'second': (30, 52)}


def _initial_checkpoint(configs, root):
  """The model's initial weights."""
  with tf.Graph().as_default():
    model = model_builder.build(configs['model'], is_training=False)
    preprocessed, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
    model.postprocess(model.predict(preprocessed, shapes), shapes)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return tf.compat.v1.train.Saver().save(
          session, os.path.join(str(root), 'model.ckpt'))


@pytest.fixture(scope='module')
def inference(tmp_path_factory):
  """Exports the model, runs the tutorial script; returns the paths."""
  root = tmp_path_factory.mktemp('tutorial')
  config = tiny_mask_rcnn.write_config(root, root / 'data', extractor='fake')
  configs = config_util.get_configs_from_pipeline_file(config)
  export_dir = str(root / 'export')
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
        'fake', fakes.FakeFasterRCNNFeatureExtractor)
    exporter.export_inference_graph(
        'image_tensor', config_util.read_pipeline_config(config),
        _initial_checkpoint(configs, root), export_dir)
  image_dir = root / 'images'
  image_dir.mkdir()
  rng = np.random.RandomState(5)
  for name, size in IMAGES.items():
    Image.fromarray(rng.randint(0, 256, size=size + (3,)).astype(
        np.uint8)).save(str(image_dir / (name + '.png')))
  out = str(root / 'out')
  stdout = sample_scripts.run(
      'run_inference_tutorial.py',
      frozen_graph=os.path.join(export_dir, 'frozen_inference_graph.pb'),
      label_map=configs['eval_input_config'].label_map_path,
      image_dir=image_dir, output_dir=out, min_score_thresh=0.0)
  return {'root': root, 'export': export_dir, 'out': out, 'stdout': stdout,
          'images': image_dir}


def _served(serve, image):
  """The SavedModel's outputs and its masks pasted with ops directly."""
  outputs = {k: v.numpy()[0] for k, v in
             serve(inputs=tf.constant(image[np.newaxis])).items()}
  count = int(outputs['num_detections'])
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    pasted = session.run(tf.cast(ops.reframe_box_masks_to_image_masks(
        tf.constant(outputs['detection_masks'][:count]),
        tf.constant(outputs['detection_boxes'][:count]),
        image.shape[0], image.shape[1]) > 0.5, tf.uint8))
  return outputs, count, pasted


def test_tutorial_loop_writes_drawn_images_and_coco_results(inference):
  assert 'first: 10 detections' in inference['stdout']
  with open(os.path.join(inference['out'], 'detections.json')) as f:
    detections = json.load(f)
  with open(os.path.join(inference['out'], 'segments.json')) as f:
    segments = json.load(f)
  serve = tf.saved_model.load(os.path.join(
      inference['export'], 'saved_model')).signatures['serving_default']
  for name, (height, width) in IMAGES.items():
    image = np.array(Image.open(str(inference['images'] / (name + '.png'))))
    drawn = np.array(Image.open(os.path.join(
        inference['out'], name + '_detections.png')))
    assert drawn.shape == (height, width, 3)
    assert (drawn != image).any()
    outputs, count, pasted = _served(serve, image)
    mine = [d for d in detections if d['image_id'] == name]
    assert len(mine) == count == 10
    expected_boxes = outputs['detection_boxes'][:count] * [height, width,
                                                           height, width]
    np.testing.assert_allclose(
        [d['bbox'] for d in mine],
        np.stack([expected_boxes[:, 1], expected_boxes[:, 0],
                  expected_boxes[:, 3] - expected_boxes[:, 1],
                  expected_boxes[:, 2] - expected_boxes[:, 0]], 1),
        atol=1e-3)
    masks = [mask_utils.decode(s['segmentation']) for s in segments
             if s['image_id'] == name]
    np.testing.assert_array_equal(np.stack(masks), pasted)


def test_coco_evaluation_of_the_exported_detections(inference, tmp_path):
  with open(os.path.join(inference['out'], 'detections.json')) as f:
    detections = json.load(f)
  # Groundtruth: two of the detections, so some match and some do not.
  image_ids = list(IMAGES)
  boxes, classes = [], []
  for name in image_ids:
    mine = [d for d in detections if d['image_id'] == name][:2]
    boxes.append(np.array([[y, x, y + h, x + w] for x, y, w, h in
                           (d['bbox'] for d in mine)], np.float32))
    classes.append(np.array([d['category_id'] for d in mine]))
  categories = [{'id': 1, 'name': 'circle'}, {'id': 2, 'name': 'square'},
                {'id': 3, 'name': 'triangle'}]
  groundtruth_path = str(tmp_path / 'groundtruth.json')
  groundtruth = coco_export.ExportGroundtruthToCOCO(
      image_ids, boxes, classes, categories, output_path=groundtruth_path)
  metrics_path = str(tmp_path / 'metrics.json')
  stdout = sample_scripts.run(
      'evaluate_coco_detections.py', groundtruth_json=groundtruth_path,
      detections_json=os.path.join(inference['out'], 'detections.json'),
      output_json=metrics_path)
  with open(metrics_path) as f:
    metrics = json.load(f)
  with open(groundtruth_path) as f:
    rounded = json.load(f)  # As the script read it: 4 float digits.
  expected, per_category = coco_tools.compute_metrics(
      rounded, detections, include_metrics_per_category=True,
      backend='pycocotools')
  assert groundtruth['annotations'][0]['id'] == 1
  for name, value in list(expected.items()) + list(per_category.items()):
    assert metrics[name] == pytest.approx(value), name
  assert 0 < metrics['Precision/mAP@.50IOU'] <= 1
  assert 'Precision/mAP: ' in stdout
