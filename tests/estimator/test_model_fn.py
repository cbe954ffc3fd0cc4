"""create_model_fn per mode, for the Estimator and for TPUEstimator.

Each test builds one mode's graph in-process around a fake DetectionModel
(two variables, no backbone) and checks what the spec carries: the loss
and train op, the metric names, the served predictions, and how the
weights are restored (scaffold or scaffold_fn; the moving averages with
eval_config.use_moving_averages).
"""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_estimator.python.estimator.tpu import tpu_estimator

from od_estimator.config import config_util
from od_estimator.core import model
from od_estimator.core import standard_fields as fields
from od_estimator.estimator import model_lib
from od_estimator.input_pipeline import inputs

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
_ModeKeys = tf.estimator.ModeKeys
_NUM_CLASSES = 2
_BATCH = 2
_MAX_BOXES = 3
_AVERAGE = '/ExponentialMovingAverage'
_BOX_WEIGHTS = 'FakeModel/box_weights'
_CONFIG = """
model { ssd { num_classes: 2 } }
train_config {
  batch_size: 2
  optimizer { momentum_optimizer {
    learning_rate { constant_learning_rate { learning_rate: 0.1 } }
  } }
}
eval_config { metrics_set: 'coco_detection_metrics' %s }
eval_input_reader { max_number_of_boxes: 3 }
"""
_COCO_BOX_METRICS = {'DetectionBoxes_Precision/mAP',
                     'DetectionBoxes_Recall/AR@100'}
_LOSSES = {'Loss/localization_loss', 'Loss/classification_loss',
           'Loss/regularization_loss', 'Loss/total_loss'}


class _FakeModel(model.DetectionModel):
  """One box and its class logits per image from the mean pixel.

  Its two variables, FakeModel/box_weights [3, 4] and
  FakeModel/class_weights [3, num_classes], start at ones.
  """

  def preprocess(self, inputs_):
    shapes = tf.tile([tf.shape(inputs_)[1:]], [tf.shape(inputs_)[0], 1])
    return inputs_, shapes

  def predict(self, preprocessed_inputs, true_image_shapes):
    del true_image_shapes  # Unused.
    pixels = tf.reduce_mean(preprocessed_inputs, axis=[1, 2]) / 255.0
    with tf.compat.v1.variable_scope('FakeModel'):
      box_weights = tf.compat.v1.get_variable(
          'box_weights', [3, 4], initializer=tf.ones_initializer())
      class_weights = tf.compat.v1.get_variable(
          'class_weights', [3, self.num_classes],
          initializer=tf.ones_initializer())
    return {'boxes': tf.sigmoid(tf.matmul(pixels, box_weights)),
            'logits': tf.matmul(pixels, class_weights)}

  def postprocess(self, prediction_dict, true_image_shapes):
    del true_image_shapes  # Unused.
    scores = tf.nn.softmax(prediction_dict['logits'])
    batch = tf.shape(scores)[0]
    return {
        _DET.detection_boxes: prediction_dict['boxes'][:, tf.newaxis],
        _DET.detection_scores: tf.reduce_max(scores, axis=1)[:, tf.newaxis],
        _DET.detection_classes: tf.cast(
            tf.argmax(scores, axis=1), tf.float32)[:, tf.newaxis],
        _DET.num_detections: tf.ones([batch], tf.float32),
    }

  def loss(self, prediction_dict, true_image_shapes):
    del true_image_shapes  # Unused.
    boxes = self.groundtruth_lists(fields.BoxListFields.boxes)
    classes = self.groundtruth_lists(fields.BoxListFields.classes)
    localization = tf.add_n([
        tf.reduce_mean(tf.square(image_boxes - predicted)) for
        image_boxes, predicted in zip(boxes, tf.unstack(
            prediction_dict['boxes']))])
    classification = tf.add_n([
        tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
            labels=image_classes, logits=tf.tile(
                logits[tf.newaxis], [tf.shape(image_classes)[0], 1])))
        for image_classes, logits in zip(classes, tf.unstack(
            prediction_dict['logits']))])
    return {'Loss/localization_loss': localization,
            'Loss/classification_loss': classification}

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    return {var.op.name: var for var in tf.compat.v1.global_variables()
            if var.op.name.startswith('FakeModel/')}


def _fake_model_fn(is_training, add_summaries):
  del is_training, add_summaries  # Unused.
  return _FakeModel(_NUM_CLASSES)


def _configs(use_moving_averages=False):
  text = _CONFIG % ('use_moving_averages: true' if use_moving_averages
                    else '')
  return config_util.create_configs_from_pipeline_proto(
      config_util.parse_pipeline_text(text))


def _features():
  return {
      _IN.image: tf.fill([_BATCH, 8, 8, 3], 128.0),
      _IN.true_image_shape: tf.constant([[8, 8, 3]] * _BATCH),
      _IN.original_image_spatial_shape: tf.constant([[8, 8]] * _BATCH),
      inputs.HASH_KEY: tf.constant(['a', 'b']),
  }


def _labels():
  """Two boxes in the first image, one in the second (padded to 3)."""
  boxes = np.zeros([_BATCH, _MAX_BOXES, 4], np.float32)
  boxes[0, :2] = [[0.1, 0.1, 0.5, 0.5], [0.2, 0.3, 0.9, 0.8]]
  boxes[1, :1] = [[0.0, 0.0, 1.0, 1.0]]
  classes = np.zeros([_BATCH, _MAX_BOXES, _NUM_CLASSES], np.float32)
  classes[0, 0, 0] = classes[0, 1, 1] = classes[1, 0, 1] = 1.0
  return {
      _IN.groundtruth_boxes: tf.constant(boxes),
      _IN.groundtruth_classes: tf.constant(classes),
      _IN.groundtruth_weights: tf.ones([_BATCH, _MAX_BOXES]),
      _IN.num_groundtruth_boxes: tf.constant([2, 1]),
  }


def _spec(mode, use_tpu, configs=None):
  """The spec of `mode` in the default graph; TPUEstimator's with use_tpu."""
  model_fn = model_lib.create_model_fn(
      _fake_model_fn, configs or _configs(), use_tpu=use_tpu)
  labels = None if mode == _ModeKeys.PREDICT else _labels()
  params = {'use_tpu': True} if use_tpu else None
  return model_fn(_features(), labels, mode, params)


def _run(fetches, scaffold=None, checkpoint=None):
  """Runs fetches after initializing the variables (restoring checkpoint
  with the scaffold's saver when given)."""
  with tf.compat.v1.Session() as sess:
    sess.run([tf.compat.v1.global_variables_initializer(),
              tf.compat.v1.local_variables_initializer()])
    if checkpoint:
      scaffold.saver.restore(sess, checkpoint)
    return sess.run(fetches)


def test_train_estimator_spec_has_a_finite_loss_and_a_train_op():
  with tf.Graph().as_default():
    spec = _spec(_ModeKeys.TRAIN, use_tpu=False)
    assert isinstance(spec, tf.estimator.EstimatorSpec)
    assert isinstance(spec.scaffold.saver, tf.compat.v1.train.Saver)
    box_weights = tf.compat.v1.global_variables(_BOX_WEIGHTS)[0]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      loss, _ = sess.run([spec.loss, spec.train_op])
      weights = sess.run(box_weights)
  assert np.isfinite(loss) and loss > 0
  assert not np.allclose(weights, 1.0)  # The step moved them from ones.


def test_train_tpu_spec_gives_its_saver_through_scaffold_fn():
  with tf.Graph().as_default():
    spec = _spec(_ModeKeys.TRAIN, use_tpu=True)
    assert isinstance(spec, tpu_estimator.TPUEstimatorSpec)
    assert spec.train_op is not None
    assert isinstance(spec.scaffold_fn().saver, tf.compat.v1.train.Saver)
    # Its graph holds CrossShardOptimizer's all-reduce, which has no CPU
    # kernel: the loss's value is checked off TPU, above.
    assert spec.loss.dtype == tf.float32 and spec.loss.shape.rank == 0
    assert spec.loss.op.name == 'total_loss'


def test_eval_estimator_spec_has_the_metric_set_and_the_losses():
  with tf.Graph().as_default():
    spec = _spec(_ModeKeys.EVAL, use_tpu=False)
    assert isinstance(spec, tf.estimator.EstimatorSpec)
    assert _COCO_BOX_METRICS | _LOSSES <= set(spec.eval_metric_ops)
    assert spec.scaffold.saver is None  # The raw weights, by default.
    assert np.isfinite(_run(spec.loss))


def test_eval_tpu_spec_has_a_metric_fn_giving_the_same_metrics():
  with tf.Graph().as_default():
    estimator_metrics = set(_spec(_ModeKeys.EVAL,
                                  use_tpu=False).eval_metric_ops)
  with tf.Graph().as_default():
    spec = _spec(_ModeKeys.EVAL, use_tpu=True)
    assert isinstance(spec, tpu_estimator.TPUEstimatorSpec)
    assert spec.scaffold_fn is None
    metric_fn, tensors = spec.eval_metrics
    # Outfed tensors keep a batch dimension, the scalar losses too.
    assert all(tensors[name].shape.as_list() == [1] for name in _LOSSES)
    assert set(metric_fn(**tensors)) == estimator_metrics
    assert np.isfinite(_run(spec.loss))


@pytest.mark.parametrize('use_tpu', [False, True])
def test_predict_spec_serves_the_exported_detections(use_tpu):
  with tf.Graph().as_default():
    spec = _spec(_ModeKeys.PREDICT, use_tpu=use_tpu)
    if use_tpu:
      assert isinstance(spec, tpu_estimator.TPUEstimatorSpec)
      assert spec.scaffold_fn is None
    else:
      assert isinstance(spec, tf.estimator.EstimatorSpec)
      assert spec.scaffold.saver is None
    assert set(spec.predictions) == {
        _DET.detection_boxes, _DET.detection_scores, _DET.detection_classes,
        _DET.num_detections}
    serving = spec.export_outputs[
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
    assert set(serving.outputs) == set(spec.predictions)
    predictions = _run(spec.predictions)
  # Served classes are 1-based label map ids: the fake's class 0 or 1.
  assert set(predictions[_DET.detection_classes].ravel()) <= {1.0, 2.0}
  np.testing.assert_array_equal(predictions[_DET.num_detections], [1, 1])


def _write_averaged_checkpoint(path):
  """A checkpoint whose weights are 1 and whose averages are 2."""
  with tf.Graph().as_default():
    _FakeModel(_NUM_CLASSES).predict(tf.zeros([1, 8, 8, 3]), None)
    raw = tf.compat.v1.global_variables()
    averages = [tf.compat.v1.get_variable(
        var.op.name + _AVERAGE, var.shape, initializer=tf.constant_initializer(
            2.0)) for var in raw]
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      assert len(averages) == 2
      return tf.compat.v1.train.Saver().save(sess, path)


@pytest.mark.parametrize('mode', [_ModeKeys.EVAL, _ModeKeys.PREDICT])
@pytest.mark.parametrize('use_tpu', [False, True])
def test_moving_averages_are_restored_into_the_weights(tmp_path, mode,
                                                        use_tpu):
  checkpoint = _write_averaged_checkpoint(str(tmp_path / 'model.ckpt'))
  with tf.Graph().as_default():
    spec = _spec(mode, use_tpu, _configs(use_moving_averages=True))
    scaffold = spec.scaffold_fn() if use_tpu else spec.scaffold
    restored = scaffold.saver._var_list  # pylint: disable=protected-access
    assert restored[_BOX_WEIGHTS + _AVERAGE].op.name == _BOX_WEIGHTS
    assert set(restored.values()) == set(tf.compat.v1.global_variables())
    weights = _run(tf.compat.v1.trainable_variables(), scaffold, checkpoint)
  for value in weights:
    np.testing.assert_array_equal(value, np.full_like(value, 2.0))


class _SideInputModel(_FakeModel):
  """_FakeModel that takes a side input out of the features, as Context
  R-CNN takes its context features."""

  side_inputs_seen = []

  def get_side_inputs(self, features):
    return {'side_scale': features['side_scale']}

  def predict(self, preprocessed_inputs, true_image_shapes, side_scale):
    self.side_inputs_seen.append(side_scale)
    return super().predict(preprocessed_inputs * side_scale,
                           true_image_shapes)


@pytest.mark.parametrize('mode', [_ModeKeys.TRAIN, _ModeKeys.EVAL,
                                  _ModeKeys.PREDICT])
def test_model_fn_gives_predict_the_models_side_inputs(mode):
  _SideInputModel.side_inputs_seen.clear()
  model_fn = model_lib.create_model_fn(
      lambda is_training, add_summaries: _SideInputModel(_NUM_CLASSES),
      _configs())
  with tf.Graph().as_default():
    features = dict(_features(), side_scale=tf.constant(0.5))
    model_fn(features, None if mode == _ModeKeys.PREDICT else _labels(),
             mode, None)
    seen = _SideInputModel.side_inputs_seen
    assert len(seen) == 1 and seen[0] is features['side_scale']
