"""A tiny real SSD learns one fixed batch: end-to-end training sanity check.

The demo config (SSD MobileNet v2) is shrunk to depth multiplier 0.25 and
64x64 inputs, built through model_builder and trained with a plain
tf.compat.v1 optimizer on one synthetic batch; its loss must fall and its
detections must then find the training boxes with their classes.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.builders import model_builder
from tests import fast_graphs
from tests import tiny_ssd

SIZE = 64
# Measured with this seed: after 10 steps the loss is 0.08 of the initial
# and both tests' checks pass (as at every 10th step up to 100; 30 steps
# bring it to 0.004).
NUM_STEPS = 10
NUM_CLASSES = 3
# Per image: boxes (normalized ymin, xmin, ymax, xmax), 0-based classes.
BOXES = [np.array([[0.05, 0.1, 0.45, 0.45], [0.5, 0.55, 0.95, 0.9]]),
         np.array([[0.3, 0.2, 0.8, 0.7]])]
CLASSES = [np.array([0, 2]), np.array([1])]
# Fill colour of each class on a grey background.
COLOURS = [[230, 40, 40], [40, 230, 40], [40, 40, 230]]


def _images():
  """[batch, SIZE, SIZE, 3] float32: each box filled with its class colour."""
  images = np.full([len(BOXES), SIZE, SIZE, 3], 128.0, np.float32)
  for image, boxes, classes in zip(images, BOXES, CLASSES):
    for box, label in zip(boxes, classes):
      ymin, xmin, ymax, xmax = np.round(box * SIZE).astype(int)
      image[ymin:ymax, xmin:xmax] = COLOURS[label]
  return images


def _provide_groundtruth(model):
  model.provide_groundtruth(
      [tf.constant(boxes, tf.float32) for boxes in BOXES],
      [tf.one_hot(classes, NUM_CLASSES) for classes in CLASSES])


def _train_and_detect(model_config):
  """Trains on the fixed batch.

  Returns:
    (initial total loss, final total loss, detections after training).
    Detections come from the training graph: with two images batch norm
    statistics over the 1x1 top feature maps are too noisy for moving
    averages to stand in for them.
  """
  with fast_graphs.new_graph():
    tf.compat.v1.set_random_seed(1)
    model = model_builder.build(model_config, is_training=True,
                                add_summaries=False)
    preprocessed, true_shapes = model.preprocess(tf.constant(_images()))
    predictions = model.predict(preprocessed, true_shapes)
    _provide_groundtruth(model)
    losses = model.loss(predictions, true_shapes)
    total_loss = tf.add_n(list(losses.values()) +
                          model.regularization_losses())
    optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate=0.005)
    with tf.control_dependencies(model.updates()):
      train_op = optimizer.minimize(total_loss)
    detections = model.postprocess(predictions, true_shapes)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      # Each step fetches its loss too: one run signature (each distinct one
      # is optimized again), and the first step's loss, computed before its
      # update, is the initial loss.
      step_losses = [sess.run([total_loss, train_op])[0]
                     for _ in range(NUM_STEPS)]
      final_loss, detections = sess.run([total_loss, detections])
  return step_losses[0], final_loss, detections


def _iou(box, boxes):
  """IoU of one [4] box with each of [n, 4] boxes."""
  ymin = np.maximum(box[0], boxes[:, 0])
  xmin = np.maximum(box[1], boxes[:, 1])
  ymax = np.minimum(box[2], boxes[:, 2])
  xmax = np.minimum(box[3], boxes[:, 3])
  intersection = np.maximum(ymax - ymin, 0) * np.maximum(xmax - xmin, 0)

  def area(b):
    return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
  return intersection / (area(box) + area(boxes) - intersection)


@pytest.fixture(scope='module')
def trained():
  """(initial loss, final loss, detections) of one training run."""
  return _train_and_detect(tiny_ssd.model_config(SIZE))


def test_training_drives_the_loss_down(trained):
  initial_loss, final_loss, _ = trained
  assert np.isfinite(initial_loss) and np.isfinite(final_loss)
  assert final_loss < 0.3 * initial_loss, (initial_loss, final_loss)


def test_detections_find_the_training_boxes(trained):
  detections = trained[2]
  for index, (boxes, classes) in enumerate(zip(BOXES, CLASSES)):
    num_boxes = len(boxes)
    top_boxes = detections['detection_boxes'][index, :num_boxes]
    top_classes = detections['detection_classes'][index, :num_boxes]
    # The best detection is a training box with its class.
    ious = _iou(top_boxes[0], boxes)
    best = int(np.argmax(ious))
    assert ious[best] > 0.5, (index, top_boxes[0], boxes)
    assert top_classes[0] == classes[best]
    # Every training box is among the image's top detections.
    for box, label in zip(boxes, classes):
      found = (_iou(box, top_boxes) > 0.5) & (top_classes == label)
      assert found.any(), (index, box, label, top_boxes, top_classes)
