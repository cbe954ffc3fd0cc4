"""`od-estimator detect` on a mask model: masks pasted into each image,
drawn, and written as COCO segm results next to the box results.

The SavedModel is hand-made (a TF1 graph returning fixed detections with
box-relative masks under the exporter's output names), so the test needs
no training; the pasting is checked against ops.reframe_box_masks_to_image
_masks run directly.
"""
import json
import os

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
import pytest
import tensorflow as tf

from od_estimator import detect
from od_estimator.compat import ops

BOXES = np.array([[0.1, 0.2, 0.6, 0.7], [0.5, 0.05, 0.95, 0.4],
                  [0.0, 0.0, 0.1, 0.1]], np.float32)
SCORES = np.array([0.9, 0.8, 0.1], np.float32)
CLASSES = np.array([1.0, 2.0, 1.0], np.float32)
BOX_MASKS = np.random.RandomState(0).uniform(size=(3, 6, 6)).astype(
    np.float32)
LABEL_MAP = "item { id: 1 name: 'cat' } item { id: 2 name: 'dog' }"
IMAGES = {'3.png': (40, 56), '9.png': (64, 30)}


@pytest.fixture(scope='module')
def mask_model(tmp_path_factory):
  """A SavedModel with the exporter's signature and fixed mask outputs."""
  path = str(tmp_path_factory.mktemp('mask_export') / 'saved_model')
  with tf.Graph().as_default():
    images = tf.compat.v1.placeholder(tf.uint8, [None, None, None, 3],
                                      name='image_tensor')
    batch = tf.shape(images)[0]

    def batched(value):
      value = tf.constant(value)
      return tf.tile(value[tf.newaxis],
                     tf.concat([[batch], tf.ones_like(tf.shape(value))], 0))
    outputs = {
        'detection_boxes': batched(BOXES),
        'detection_scores': batched(SCORES),
        'detection_classes': batched(CLASSES),
        'num_detections': tf.fill([batch], 3.0),
        'detection_masks': batched(BOX_MASKS),
    }
    with tf.compat.v1.Session() as sess:
      builder = tf.compat.v1.saved_model.Builder(path)
      signature = tf.compat.v1.saved_model.predict_signature_def(
          {'inputs': images}, outputs)
      builder.add_meta_graph_and_variables(
          sess, [tf.compat.v1.saved_model.tag_constants.SERVING],
          signature_def_map={'serving_default': signature})
      builder.save()
  return path


@pytest.fixture(scope='module')
def run(mask_model, tmp_path_factory):
  folder = tmp_path_factory.mktemp('mask_images')
  for name, (height, width) in IMAGES.items():
    Image.fromarray(np.full([height, width, 3], 128, np.uint8)).save(
        str(folder / name))
  label_map = folder / 'label_map.pbtxt'
  label_map.write_text(LABEL_MAP)
  out = str(folder / 'out')
  summary = detect.run(mask_model, str(label_map), str(folder),
                       output_dir=out, min_score_threshold=0.5)
  return summary, out


def _pasted(height, width):
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    return sess.run(tf.cast(ops.reframe_box_masks_to_image_masks(
        tf.constant(BOX_MASKS[:2]), tf.constant(BOXES[:2]), height, width)
                            > 0.5, tf.uint8))


def test_segm_results_hold_the_pasted_masks(run):
  summary, out = run
  assert summary['segm_output'] == os.path.join(out, detect.SEGM_FILE)
  with open(summary['segm_output']) as f:
    results = json.load(f)
  assert len(results) == 4  # Two images x the two detections above 0.5.
  for name, (height, width) in IMAGES.items():
    image_id = int(name.split('.')[0])
    mine = [r for r in results if r['image_id'] == image_id]
    assert [r['category_id'] for r in mine] == [1, 2]
    assert [r['score'] for r in mine] == pytest.approx(SCORES[:2])
    decoded = np.stack([mask_utils.decode(r['segmentation']) for r in mine])
    np.testing.assert_array_equal(decoded, _pasted(height, width))
    assert decoded.sum() > 0
  with open(summary['output']) as f:
    assert len(json.load(f)) == 4  # The box results, next to them.


def test_segm_results_load_in_pycocotools(run):
  summary, _ = run
  coco = COCO()
  coco.dataset = {
      'images': [{'id': int(n.split('.')[0]), 'height': h, 'width': w}
                 for n, (h, w) in IMAGES.items()],
      'annotations': [], 'categories': [{'id': 1, 'name': 'cat'},
                                        {'id': 2, 'name': 'dog'}]}
  coco.createIndex()
  loaded = coco.loadRes(summary['segm_output'])
  assert len(loaded.anns) == 4


def test_masks_are_drawn(run):
  _, out = run
  drawn = np.array(Image.open(os.path.join(out, '3_detections.png')))
  mask = _pasted(*IMAGES['3.png'])[0].astype(bool)
  # Inside the first mask, away from its box lines, pixels are tinted.
  ys, xs = np.nonzero(mask)
  inside = drawn[ys, xs]
  assert (inside != 128).any(axis=1).mean() > 0.9
  assert (drawn[~(mask | _pasted(*IMAGES['3.png'])[1].astype(bool))] ==
          128).all(axis=1).mean() > 0.5
