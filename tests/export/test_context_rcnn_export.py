"""A Context R-CNN exported with its side inputs serves Estimator.predict's
detections: through export_inference_graph's original flags, and through
model_main's final Servo export (create_predict_input_fn's receiver).

The model is tests/estimator/test_model_fn_context's tiny Context R-CNN (the
fake extractor, 32x32 images, 5 context rows of 6 values) from its
initialization: the exports and Estimator.predict read one checkpoint.
"""
import os

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator import detect
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.export import export_inputs
from od_estimator.export import exporter
from od_estimator.input_pipeline import context_features
from od_estimator.input_pipeline import inputs
from od_estimator.models import faster_rcnn_feature_extractor_registry
from tests import fakes
from tests import image_inputs
from tests import saved_models
from tests.command_modules import run_command
from tests.estimator import test_model_fn_context as context_tests

_IN = fields.InputDataFields
_SIZE = 32
_ROWS, _LENGTH = 5, 6
_VALID = 3
_TOLERANCE = 1e-4
_OUTPUTS = ('detection_boxes', 'detection_scores', 'detection_classes',
            'num_detections')
# The original's documented command line (g3doc/context_rcnn.md), with the
# tiny model's context_config sizes.
_SIDE_INPUT_FLAGS = (
    '--use_side_inputs', 'True',
    '--side_input_shapes', '1,%d,%d/1' % (_ROWS, _LENGTH),
    '--side_input_names', 'context_features,valid_context_size',
    '--side_input_types', 'float,int')


@pytest.fixture(scope='module')
def fake_extractor():
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
        'fake', fakes.FakeFasterRCNNFeatureExtractor)
    yield


def _context(seed, padding_seed=None):
  """[1, _ROWS, _LENGTH] context: _VALID random rows, then padding rows
  (zeros, or random from padding_seed)."""
  context = np.zeros([1, _ROWS, _LENGTH], np.float32)
  context[0, :_VALID] = np.random.RandomState(seed).uniform(
      -1, 1, [_VALID, _LENGTH])
  if padding_seed is not None:
    context[0, _VALID:] = np.random.RandomState(padding_seed).uniform(
        -5, 5, [_ROWS - _VALID, _LENGTH])
  return context


def _image():
  return np.random.RandomState(3).randint(
      0, 256, [1, _SIZE, _SIZE, 3]).astype(np.uint8)


def _estimator(config, model_dir):
  return tf.estimator.Estimator(context_tests.model_fn(config),
                                model_dir=model_dir)


@pytest.fixture(scope='module')
def trained(tmp_path_factory, fake_extractor):
  """The initialized model's config file, checkpoint and model_dir."""
  del fake_extractor
  root = tmp_path_factory.mktemp('context_rcnn')
  config = context_tests.pipeline()
  config_util.save_pipeline_config(config, str(root))
  model_dir = str(root / 'train')
  with tf.Graph().as_default():
    context_tests.model_fn(config)(
        {_IN.image: tf.zeros([1, _SIZE, _SIZE, 3]),
         _IN.true_image_shape: tf.constant([[_SIZE, _SIZE, 3]]),
         _IN.context_features: tf.zeros([1, _ROWS, _LENGTH]),
         _IN.valid_context_size: tf.constant([_VALID])},
        None, tf.estimator.ModeKeys.PREDICT, None)
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      checkpoint = tf.compat.v1.train.Saver().save(
          session, os.path.join(model_dir, 'model.ckpt'), global_step=0)
  return {'root': root, 'config': config, 'model_dir': model_dir,
          'config_path': str(root / 'pipeline.config'),
          'checkpoint': checkpoint}


@pytest.fixture(scope='module')
def predicted(trained):
  """Estimator.predict's detections of the image with _context(0)."""
  def input_fn():
    model = model_builder.build(trained['config'].model, is_training=False)
    images, true_image_shape = model.preprocess(
        tf.constant(_image(), tf.float32))
    return tf.data.Dataset.from_tensors({
        _IN.image: images, _IN.true_image_shape: true_image_shape,
        _IN.context_features: tf.constant(_context(0)),
        _IN.valid_context_size: tf.constant([_VALID])})
  (batch,) = _estimator(trained['config'], trained['model_dir']).predict(
      input_fn, checkpoint_path=trained['checkpoint'],
      yield_single_examples=False)
  return batch


@pytest.fixture(scope='module')
def exported(trained, tmp_path_factory):
  """export_inference_graph with the original's side input flags."""
  directory = tmp_path_factory.mktemp('exported') / 'export'
  result = run_command('export_inference_graph', (
      '--input_type', 'image_tensor',
      '--pipeline_config_path', trained['config_path'],
      '--trained_checkpoint_prefix', trained['checkpoint'],
      '--output_directory', str(directory)) + _SIDE_INPUT_FLAGS)
  assert result.returncode == 0, result.stderr
  return str(directory)


def _serve(exported, context, valid=_VALID):
  return saved_models.serve(os.path.join(exported, 'saved_model'), {
      'inputs': _image(), _IN.context_features: context,
      _IN.valid_context_size: np.array([valid], np.int32)})


def _assert_equal_detections(served, expected):
  for key in _OUTPUTS:
    np.testing.assert_allclose(served[key], expected[key], atol=_TOLERANCE,
                               err_msg=key)


@pytest.fixture(scope='module')
def served(exported):
  """The export's detections of the image with _context(0)."""
  return _serve(exported, _context(0))


def test_export_serves_estimator_predicts_detections(served, predicted):
  _assert_equal_detections(served, predicted)
  assert served['num_detections'][0] > 0


def test_padding_rows_do_not_change_the_detections_the_valid_ones_do(
    exported, served):
  _assert_equal_detections(_serve(exported, _context(0, padding_seed=1)),
                           served)
  other = _serve(exported, _context(2))
  assert not np.allclose(other['detection_scores'],
                         served['detection_scores'], atol=1e-6)


def test_frozen_graph_takes_the_side_inputs_by_name(exported, predicted):
  graph_def = tf.compat.v1.GraphDef()
  with open(os.path.join(exported, 'frozen_inference_graph.pb'), 'rb') as f:
    graph_def.ParseFromString(f.read())
  placeholders = {node.name: node for node in graph_def.node
                  if node.op == 'Placeholder'}
  assert set(placeholders) == {'image_tensor', 'context_features',
                               'valid_context_size'}
  with tf.Graph().as_default() as graph:
    tf.compat.v1.import_graph_def(graph_def, name='')
    with tf.compat.v1.Session(graph=graph) as session:
      served = session.run({key: key + ':0' for key in _OUTPUTS}, {
          'image_tensor:0': _image(), 'context_features:0': _context(0),
          'valid_context_size:0': [_VALID]})
  _assert_equal_detections(served, predicted)


def test_servo_export_receives_the_side_inputs(trained, predicted, tmp_path):
  """model_main's final export: create_predict_input_fn's receiver."""
  predict_input_fn = inputs.create_predict_input_fn(
      trained['config'].model, trained['config'].eval_input_reader[0])
  path = _estimator(trained['config'], trained['model_dir']).export_saved_model(
      str(tmp_path), predict_input_fn, checkpoint_path=trained['checkpoint'])
  served = saved_models.serve(
      path.decode() if isinstance(path, bytes) else path,
      {inputs.SERVING_FED_EXAMPLE_KEY: image_inputs.tf_example(_image()[0]),
       _IN.context_features: _context(0),
       _IN.valid_context_size: np.array([_VALID], np.int32)})
  _assert_equal_detections(served, predicted)


def _export_error(trained, tmp_path, *flags):
  result = run_command('export_inference_graph', (
      '--pipeline_config_path', trained['config_path'],
      '--trained_checkpoint_prefix', trained['checkpoint'],
      '--output_directory', str(tmp_path / 'out')) + flags)
  assert result.returncode == 1
  assert 'Traceback' not in result.stderr
  assert not os.path.exists(str(tmp_path / 'out'))
  (error,) = [line for line in result.stderr.splitlines()
              if line.startswith('error:')]
  return error


def test_an_export_without_the_side_inputs_names_the_flags(trained, tmp_path):
  error = _export_error(trained, tmp_path)
  assert ('takes the side inputs context_features, valid_context_size' in
          error)
  assert ('--use_side_inputs --side_input_shapes=1,5,6/1 '
          '--side_input_names=context_features,valid_context_size '
          '--side_input_types=float,int' in error)


@pytest.mark.parametrize('flags, expected', [
    (('--side_input_names', 'context_features'),
     'as many side inputs; got 2 shape'),
    (('--side_input_names', 'context_features,context_size'),
     '--side_input_names must be context_features,valid_context_size'),
    (('--side_input_types', 'float,float'),
     'side input valid_context_size is int32 of rank 1'),
    (('--side_input_shapes', '1,5,6/1,1,1'),
     'side input valid_context_size is int32 of rank 1'),
    (('--side_input_shapes', '1,5,x/1'), '--side_input_shapes must be'),
])
def test_side_inputs_unlike_the_models_are_refused(trained, tmp_path, flags,
                                                   expected):
  assert expected in _export_error(trained, tmp_path,
                                   *_side_input_flags(*flags))


def _side_input_flags(*replaced):
  """_SIDE_INPUT_FLAGS with the values of the `replaced` flag-value pairs."""
  given = dict(zip(_SIDE_INPUT_FLAGS[2::2], _SIDE_INPUT_FLAGS[3::2]))
  given.update(zip(replaced[::2], replaced[1::2]))
  return ('--use_side_inputs',) + sum(given.items(), ())


def test_side_inputs_in_another_order_are_accepted(trained, tmp_path):
  # Checked up to the checkpoint, which is missing.
  error = _export_error(trained, tmp_path, *_side_input_flags(
      '--side_input_names', 'valid_context_size,context_features',
      '--side_input_types', 'int,float', '--side_input_shapes', '1/1,5,6',
      '--trained_checkpoint_prefix', str(tmp_path / 'missing')))
  assert 'checkpoint not found' in error


def test_side_inputs_for_a_model_without_are_refused(tmp_path):
  config = context_tests.pipeline()
  config.model.faster_rcnn.ClearField('context_config')
  config_util.save_pipeline_config(config, str(tmp_path))
  result = run_command('export_inference_graph', (
      '--pipeline_config_path', str(tmp_path / 'pipeline.config'),
      '--trained_checkpoint_prefix', str(tmp_path / 'missing'),
      '--output_directory', str(tmp_path / 'out')) + _SIDE_INPUT_FLAGS)
  assert result.returncode == 1
  assert ('error: --use_side_inputs: this model takes no side inputs' in
          result.stderr)


def test_build_detection_graph_names_the_side_inputs_a_model_takes(trained):
  with tf.Graph().as_default():
    model = model_builder.build(trained['config'].model, is_training=False)
    with pytest.raises(ValueError, match=(
        'takes the side inputs context_features, valid_context_size .* '
        'export with --use_side_inputs '
        '--side_input_names=context_features,valid_context_size')):
      exporter.build_detection_graph('image_tensor', model, None)


def test_side_input_specs_follow_the_context_config():
  config = context_tests.pipeline()
  assert context_features.side_input_specs(config.model) == [
      (_IN.context_features, [1, _ROWS, _LENGTH], tf.float32),
      (_IN.valid_context_size, [1], tf.int32)]
  assert context_features.side_input_specs(config.model, None)[1] == (
      _IN.valid_context_size, [None], tf.int32)
  config.model.faster_rcnn.context_config.max_num_context_features = 2000
  config.model.faster_rcnn.context_config.context_feature_length = 2057
  assert export_inputs.side_input_flags(
      context_features.side_input_specs(config.model)) == (
          '--use_side_inputs --side_input_shapes=1,2000,2057/1 '
          '--side_input_names=context_features,valid_context_size '
          '--side_input_types=float,int')
  config.model.faster_rcnn.ClearField('context_config')
  assert context_features.side_input_specs(config.model) == []


def test_detect_refuses_an_export_with_side_inputs_in_one_line(
    exported, tmp_path, capsys):
  Image.fromarray(_image()[0]).save(str(tmp_path / 'frame.png'))
  label_map = tmp_path / 'label_map.pbtxt'
  label_map.write_text("item { id: 1 name: 'a' }\n")
  assert detect.main([
      '--saved_model_dir=%s' % os.path.join(exported, 'saved_model'),
      '--input=%s' % (tmp_path / 'frame.png'),
      '--label_map_path=%s' % label_map,
      '--output_dir=%s' % (tmp_path / 'out')]) == 1
  error = capsys.readouterr().err.strip()
  assert len(error.splitlines()) == 1, error
  assert 'side inputs context_features, valid_context_size' in error
  assert not (tmp_path / 'out').exists()
