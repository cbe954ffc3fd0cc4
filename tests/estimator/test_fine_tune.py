"""Fine-tuning and moving averages, end to end on the tiny SSD.

The tiny SSD with MobileNet v1 (tiny_ssd.V1_OVERRIDES: the restore maps
are the feature extractors' shared code, and test_checkpoint_compat checks
MobileNet v2's names). The source checkpoint is the session's
averaged_tiny_ssd (tests/trained_models.py: one step with moving averages
of decay 0.5); a new training run starts from it via
train_config.fine_tune_checkpoint. Its variables, read as soon as its
session is initialized (step 0), show what was restored; the run then stops
before its first step. The other restores (load_all_detection_checkpoint_vars,
a classification-only MobileNet v1 checkpoint) restore what
fine_tune.restore_map (the TRAIN model_fn's) asks into one network of the
tiny SSD, built once without the loss, gradients and optimizer (most of a
training graph's ops). The launches from a checkpoint of another
model are about the restore report and the launch, not the network: they
run the tiniest model (tests/fakes.py's fake Faster R-CNN extractor).
"""
import re

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.estimator import fine_tune
from od_estimator.estimator import model_lib
from od_estimator.nets import mobilenet_v1
from od_estimator.protos import train_pb2
from od_estimator.config import config_util
from tests import fast_graphs
from tests import log_capture
from tests import tiny_faster_rcnn
from tests import tiny_ssd

pytestmark = pytest.mark.usefixtures('fake_extractor')

EMA = '/ExponentialMovingAverage'
# Optimizer variables and averages, created after the restore map is made.
NOT_MODEL = re.compile(r'/(Momentum|Adam|Adam_1|RMSProp|RMSProp_1|'
                       r'ExponentialMovingAverage)$|^beta[12]_power$|'
                       r'^global_step$')


def _hparams(overrides, base=tiny_ssd.V1_OVERRIDES):
  """The hparams of `base` (the tiny SSD's), updated with `overrides`."""
  hparams = config_util.parse_hparams_overrides(base)
  hparams.update(overrides)
  return hparams


def _parts(config, model_dir, overrides, save=True,
           base=tiny_ssd.V1_OVERRIDES):
  """Estimator and inputs; without `save`, no checkpoints or summaries."""
  hparams = _hparams(overrides, base)
  run_config = tiny_ssd.run_config(model_dir)
  if not save:
    # Saving writes the graph as text, the slowest part of a short run.
    run_config = run_config.replace(
        save_checkpoints_secs=None, save_checkpoints_steps=None,
        save_summary_steps=None, log_step_count_steps=None)
  return model_lib.create_estimator_and_inputs(
      run_config, hparams=hparams, pipeline_config_path=config)


class _ReadVariables(tf.compat.v1.train.SessionRunHook):
  """Reads variables once the session has initialized or restored them.

  With `stop`, the run then ends before its first step.
  """

  def __init__(self, trainable_only=False, stop=False):
    self._trainable_only = trainable_only
    self._stop = stop
    self.values = {}

  def after_create_session(self, session, coord):
    variables = (tf.compat.v1.trainable_variables() if self._trainable_only
                 else tf.compat.v1.global_variables())
    for variable, value in zip(variables, session.run(variables)):
      self.values[variable.op.name] = value
    if self._stop:
      coord.request_stop()


def _train(config, model_dir, overrides, base=tiny_ssd.V1_OVERRIDES):
  """Starts a training in-process; returns (variables at step 0, absl log).

  No step, nothing saved: the run stops once its variables are read.
  """
  parts = _parts(config, model_dir, overrides, save=False, base=base)
  reader = _ReadVariables(stop=True)
  with log_capture.absl_messages() as messages:
    parts['estimator'].train(parts['train_input_fn'], max_steps=1,
                             hooks=[reader])
  return reader.values, '\n'.join(messages)


def _values(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def _model_variables(values, prefix=''):
  return sorted(name for name in values if name.startswith(prefix) and
                not NOT_MODEL.search(name))


def _line(log, start):
  lines = [line for line in log.splitlines() if line.startswith(start)]
  assert len(lines) == 1, (start, log[-3000:])
  return lines[0]


@pytest.fixture(scope='module')
def root(tmp_path_factory):
  return tmp_path_factory.mktemp('fine_tune')


@pytest.fixture(scope='module')
def config(averaged_tiny_ssd):
  """The demo config, as written, on the source's records (read only)."""
  return averaged_tiny_ssd['config']


@pytest.fixture(scope='module')
def source(averaged_tiny_ssd):
  """One step with moving averages of decay 0.5.

  Returns:
    (checkpoint after the step, its values, values at step 0).
  """
  checkpoint = averaged_tiny_ssd['checkpoint']
  return (checkpoint, _values(checkpoint),
          _values(averaged_tiny_ssd['initial']))


def _fine_tune(root, config, name, checkpoint, kind,
               base=tiny_ssd.V1_OVERRIDES, **overrides):
  """Starts a fine-tuning run; returns (variables at step 0, log)."""
  overrides.update({'train_config.fine_tune_checkpoint': checkpoint,
                    'train_config.fine_tune_checkpoint_type': kind})
  return _train(config, str(root / name), overrides, base)


@pytest.fixture(scope='module')
def network(config):
  """The tiny SSD's training network with one more class (num_classes 4).

  The network alone: the loss, gradients and optimizer are none of what
  fine-tuning restores. Returns (graph, model).
  """
  configs = config_util.merge_external_params_with_configs(
      config_util.get_configs_from_pipeline_file(config),
      _hparams({'num_classes': 4}))
  size = configs['model'].ssd.image_resizer.fixed_shape_resizer.height
  with fast_graphs.new_graph() as graph:
    model = model_builder.build(configs['model'], is_training=True)
    model.predict(*model.preprocess(tf.zeros([1, size, size, 3])))
    tf.compat.v1.train.get_or_create_global_step()
  return graph, model


def _restored(network, checkpoint, kind, load_all=False):
  """The network's variables once initialized, then restored from
  `checkpoint` as fine_tune.restore_map asks; returns (values, absl log)."""
  graph, model = network
  train_config = train_pb2.TrainConfig(
      fine_tune_checkpoint=checkpoint, fine_tune_checkpoint_type=kind,
      load_all_detection_checkpoint_vars=load_all)
  with graph.as_default():
    with log_capture.absl_messages() as messages:
      restore = tf.compat.v1.train.Saver(
          fine_tune.restore_map(model, train_config))
    variables = tf.compat.v1.global_variables()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      restore.restore(session, checkpoint)
      values = dict(zip([variable.op.name for variable in variables],
                        session.run(variables)))
  return values, '\n'.join(messages)


@pytest.fixture(scope='module')
def detection(root, config, source):
  """A training run (moving averages on) from the averaged checkpoint."""
  return _fine_tune(root, config, 'detection', source[0], 'detection')


@pytest.fixture(scope='module')
def detection_all_vars(network, source):
  """load_all_detection_checkpoint_vars with one more class."""
  return _restored(network, source[0], 'detection', load_all=True)


@pytest.fixture(scope='module')
def classification_checkpoint(root):
  """A MobileNet v1 classifier (backbone + logits) at the tiny SSD's depth."""
  with tf.Graph().as_default():
    images = tf.zeros([1, 64, 64, 3])
    with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(
        is_training=False)):
      net, _ = mobilenet_v1.mobilenet_v1_base(
          images, depth_multiplier=0.25, min_depth=8, scope='MobilenetV1')
    with tf.compat.v1.variable_scope('MobilenetV1/Logits'):
      slim.conv2d(net, 1001, [1, 1], scope='Conv2d_1c_1x1')
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return tf.compat.v1.train.Saver().save(
          session, str(root / 'classifier' / 'model.ckpt'))


@pytest.fixture(scope='module')
def classification(network, classification_checkpoint):
  return _restored(network, classification_checkpoint, 'classification')


def test_detection_restores_the_feature_extractor_only(source, detection):
  restored, log = detection
  checkpoint, values, _ = source
  extractor = _model_variables(restored, 'FeatureExtractor/')
  assert len(extractor) > 100
  for name in extractor:
    np.testing.assert_array_equal(restored[name], values[name], err_msg=name)
  predictor = [name for name in _model_variables(restored, 'BoxPredictor')
               if name.endswith('weights')]
  assert predictor
  for name in predictor:
    assert not np.array_equal(restored[name], values[name]), name
  line = _line(log, 'Fine-tuning from %s (detection): restoring %d '
               'variables: ' % (checkpoint, len(extractor)))
  assert 'FeatureExtractor/MobilenetV1/Conv2d_0/weights' in line
  assert 'BoxPredictor' not in line and 'Fine-tuning: skipping' not in log


def test_detection_all_vars_skips_and_lists_the_resized_classifier(
    source, detection_all_vars):
  restored, log = detection_all_vars
  _, values, _ = source
  class_predictor = [name for name in _model_variables(restored)
                     if restored[name].shape != values[name].shape]
  assert class_predictor
  assert all('/ClassPredictor/' in name for name in class_predictor)
  kept = [name for name in _model_variables(restored)
          if name not in class_predictor]
  assert any(name.startswith('BoxPredictor') for name in kept)
  for name in kept:
    np.testing.assert_array_equal(restored[name], values[name], err_msg=name)
  # The source ran one step; the new run starts at step 0 all the same.
  assert restored['global_step'] == 0 and values['global_step'] == 1
  assert ' restoring %d variables: ' % len(kept) in log
  skipped = _line(log, 'Fine-tuning: skipping %d variables of another shape'
                  % len(class_predictor))
  for name in class_predictor:
    shapes = '%s %s vs %s' % (name, list(values[name].shape),
                              list(restored[name].shape))
    assert shapes in skipped


def test_classification_restores_the_backbone_without_scope(
    classification_checkpoint, classification):
  restored, log = classification
  values = _values(classification_checkpoint)
  backbone = [name for name in _model_variables(values)
              if not name.startswith('MobilenetV1/Logits')]
  assert len(backbone) > 100
  for name in backbone:
    np.testing.assert_array_equal(restored['FeatureExtractor/' + name],
                                  values[name], err_msg=name)
  # The SSD layers on top of the backbone are not in a classifier.
  extra = [name[len('FeatureExtractor/'):] for name in
           _model_variables(restored,
                            'FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_')]
  assert extra
  line = _line(log, 'Fine-tuning from %s (classification): restoring %d '
               'variables: ' % (classification_checkpoint, len(backbone)))
  assert 'MobilenetV1/Conv2d_0/weights' in line
  missing = _line(log, 'Fine-tuning: skipping %d variables not in the '
                  'checkpoint: ' % len(extra))
  assert all(name in missing for name in extra)


def test_moving_average_run_writes_averages(source):
  _, values, initial = source
  averaged = [name[:-len(EMA)] for name in values if name.endswith(EMA)]
  assert 'FeatureExtractor/MobilenetV1/Conv2d_0/weights' in averaged
  assert any(name.startswith('BoxPredictor') for name in averaged)
  for name in averaged:
    # Decay 0.5 after one step: halfway between the initial and new weights.
    np.testing.assert_allclose(values[name + EMA],
                               0.5 * (initial[name] + values[name]),
                               rtol=1e-5, atol=1e-7, err_msg=name)
  weights = 'FeatureExtractor/MobilenetV1/Conv2d_0/weights'
  assert not np.allclose(values[weights + EMA], values[weights])


def test_eval_with_moving_averages_reads_the_averages(root, config, source):
  checkpoint, values, _ = source
  parts = _parts(config, str(root / 'eval_ema'),
                 {'eval_with_moving_averages': True})
  reader = _ReadVariables(trainable_only=True)
  parts['estimator'].evaluate(parts['eval_input_fns'][0], steps=1,
                              checkpoint_path=checkpoint, hooks=[reader])
  assert len(reader.values) > 100
  for name, value in reader.values.items():
    np.testing.assert_array_equal(value, values[name + EMA], err_msg=name)


def test_fine_tune_from_an_averaged_checkpoint_takes_the_raw_weights(
    source, detection):
  restored, _ = detection
  _, values, _ = source
  weights = 'FeatureExtractor/MobilenetV1/Conv2d_0/weights'
  np.testing.assert_array_equal(restored[weights], values[weights])
  # The new run (moving averages are on by default) starts its averages at
  # the restored weights.
  np.testing.assert_array_equal(restored[weights + EMA], values[weights])


class _OneVariableModel:
  """Stands in for a DetectionModel: the restore map is all it is asked."""

  def restore_map(self, fine_tune_checkpoint_type,
                  load_all_detection_checkpoint_vars):
    del fine_tune_checkpoint_type, load_all_detection_checkpoint_vars
    return {'v': tf.compat.v1.get_variable('v', [1])}


def test_missing_fine_tune_checkpoint_is_a_clear_error(tmp_path):
  train_config = train_pb2.TrainConfig(
      fine_tune_checkpoint=str(tmp_path / 'model.ckpt'),
      fine_tune_checkpoint_type='detection')
  with tf.Graph().as_default():
    with pytest.raises(ValueError) as raised:
      fine_tune.restore_map(
          _OneVariableModel(), train_config)
  message = str(raised.value)
  assert 'train_config.fine_tune_checkpoint' in message
  assert 'load_pretrained=false' in message


def _save_variables(path, shapes):
  """Writes a checkpoint of zero variables {name: shape}; returns it."""
  with tf.Graph().as_default():
    for name, shape in shapes.items():
      tf.compat.v1.get_variable(name, shape)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return tf.compat.v1.train.Saver().save(session, str(path))


class _FourVariableModel:
  """A restore map of four variables v0..v3 of shape [2]."""

  def restore_map(self, fine_tune_checkpoint_type,
                  load_all_detection_checkpoint_vars):
    del fine_tune_checkpoint_type, load_all_detection_checkpoint_vars
    return {'v%d' % i: tf.compat.v1.get_variable('v%d' % i, [2])
            for i in range(4)}


class _AskedModel:
  """Records how its restore map was asked for (one variable 'v')."""

  def __init__(self):
    self.asked = []

  def restore_map(self, fine_tune_checkpoint_type,
                  load_all_detection_checkpoint_vars):
    self.asked.append((fine_tune_checkpoint_type,
                       load_all_detection_checkpoint_vars))
    return {'v': tf.compat.v1.get_variable('v', [2])}


def test_full_with_a_tf1_checkpoint_is_detection_with_every_variable(
    tmp_path):
  train_config = train_pb2.TrainConfig(
      fine_tune_checkpoint=_save_variables(tmp_path / 'model.ckpt',
                                           {'v': [2]}),
      fine_tune_checkpoint_type='full')
  model = _AskedModel()
  with tf.Graph().as_default():
    assert list(fine_tune.restore_map(model, train_config)) == ['v']
  assert model.asked == [('detection', True)]


def test_tf2_classification_checkpoint_into_tf1_names_is_refused(
    tmp_path):
  # _AskedModel's one variable 'v' is no Keras backbone variable.
  prefix = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).write(
      str(tmp_path / 'ckpt'))
  train_config = train_pb2.TrainConfig(
      fine_tune_checkpoint=prefix, fine_tune_checkpoint_type='classification')
  with tf.Graph().as_default():
    with pytest.raises(errors.UserInputError,
                       match='is a TF2 .object-based. checkpoint, whose '
                       'classification part restores into the feature '
                       'extractor types of TF2 names'):
      fine_tune.restore_map(_AskedModel(), train_config)


def test_unknown_fine_tune_checkpoint_type_names_the_supported_ones():
  train_config = train_pb2.TrainConfig(fine_tune_checkpoint='model.ckpt',
                                       fine_tune_checkpoint_type='backbone')
  with pytest.raises(errors.UserInputError,
                     match=r"fine_tune_checkpoint_type 'backbone' is not "
                     r'supported; use "classification", "detection" or '
                     r'"full"'):
    fine_tune.restore_map(_AskedModel(), train_config)


@pytest.mark.parametrize('matching, refused', [(0, True), (1, True),
                                               (2, False), (4, False)])
def test_fewer_than_half_restored_is_refused(tmp_path, matching, refused):
  shapes = {'v%d' % i: [2] for i in range(matching)}
  shapes.update({'other/conv%d/weights' % i: [3, 3] for i in range(3)})
  if matching < 4:
    shapes['v3'] = [5]  # Another shape: not restored either.
  train_config = train_pb2.TrainConfig(
      fine_tune_checkpoint=_save_variables(tmp_path / 'other.ckpt', shapes),
      fine_tune_checkpoint_type='detection')
  with tf.Graph().as_default():
    assert len(fine_tune.restore_map(_FourVariableModel(), train_config,
                                     allow_partial=True)) == matching
  with tf.Graph().as_default():
    if not refused:
      assert len(fine_tune.restore_map(_FourVariableModel(),
                                       train_config)) == matching
      return
    with pytest.raises(errors.UserInputError) as raised:
      fine_tune.restore_map(_FourVariableModel(), train_config)
  message = str(raised.value)
  assert '\n' not in message
  assert 'only %d of the 4 variables' % matching in message
  assert 'Other shape, checkpoint vs model (1): v3 [5] vs [2].' in message
  assert 'Not in it (%d): ' % (3 - matching) in message
  assert 'e.g. other/conv0/weights [3, 3]' in message
  assert '--hparams_overrides=allow_partial_fine_tune=true' in message


@pytest.fixture(scope='module')
def unrelated_checkpoint(root):
  """A checkpoint of another tiny model: nothing the fake model restores."""
  return _save_variables(root / 'unrelated' / 'model.ckpt', {
      'Net/conv1/weights': [3, 3, 3, 8], 'Net/conv1/biases': [8],
      'Net/logits/weights': [8, 10]})


@pytest.fixture(scope='module')
def fake_config(root):
  """tiny_faster_rcnn's config of the fake extractor (the tiniest model)."""
  folder = root / 'fake'
  folder.mkdir()
  return tiny_faster_rcnn.write_config(folder, folder / 'data',
                                       extractor='fake', batch_size=4)


def test_fine_tune_from_another_model_stops_before_writing(
    root, fake_config, unrelated_checkpoint):
  model_dir = root / 'unrelated_run'
  parts = model_lib.create_estimator_and_inputs(
      tiny_ssd.run_config(model_dir), hparams={
          'train_config.fine_tune_checkpoint': unrelated_checkpoint,
          'train_config.fine_tune_checkpoint_type': 'detection'},
      pipeline_config_path=fake_config, save_final_config=True)
  with pytest.raises(errors.UserInputError) as raised:
    parts['estimator'].train(parts['train_input_fn'], max_steps=1)
  assert raised.value.args[0].startswith(
      'train_config.fine_tune_checkpoint %s (detection): only 0 of the ' %
      unrelated_checkpoint)
  assert 'Net/conv1/biases [8]' in str(raised.value)
  # Not even the as-run pipeline.config.
  assert not model_dir.exists()


def test_allow_partial_fine_tune_trains_from_what_matches(
    root, fake_config, unrelated_checkpoint):
  restored, log = _fine_tune(
      root, fake_config, 'unrelated_allowed', unrelated_checkpoint,
      'detection', base='', allow_partial_fine_tune=True)
  assert 'FirstStageFeatureExtractor/layer1/weights' in restored
  assert 'Fine-tuning from %s (detection): restoring 0 variables' % (
      unrelated_checkpoint) in log
