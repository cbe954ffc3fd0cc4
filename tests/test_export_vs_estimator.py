"""Exports reproduce the Estimator's detections (tiny real SSD, end to end).

The session's averaged_tiny_ssd (tests/trained_models.py: the tiny SSD
with MobileNet v1 trained one step through model_lib's Estimator) is a
real training checkpoint with the optimizer's moving averages. It is
exported once by the export_inference_graph CLI (tf_example input), and
with Estimator.export_saved_model and the Servo exporter's tf.Example
receiver. A fresh interpreter serves every SavedModel (LOADER); each must
give Estimator.predict's outputs on the same images. Estimator predictions
and exports both carry 1-based float detection_classes (label map ids), so
they are compared as they are. The exporter's other input types (their
placeholders and decoding, before the same model graph) serve the model's
detections in tests/export/test_exporter.py.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.input_pipeline import inputs
from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from tests import command_modules
from tests import image_inputs
from tests import tiny_ssd

INPUT_TYPE = 'tf_example'  # the CLI's export
REQUIRED_KEYS = {'detection_boxes', 'detection_scores', 'detection_classes',
                 'num_detections'}
NUM_CLASSES = 3
TRAIN_STEPS = 1  # averaged_tiny_ssd's
TOLERANCE = 1e-4
_IN = fields.InputDataFields


def _start(args, **kwargs):
  return subprocess.Popen(
      args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'), **kwargs)


def _wait(process):
  """The process's stdout, once it has succeeded."""
  stdout, stderr = process.communicate(timeout=300)
  assert process.returncode == 0, stderr[-3000:]
  return stdout


@pytest.fixture(scope='module')
def root(tmp_path_factory):
  return tmp_path_factory.mktemp('export_vs_estimator')


@pytest.fixture(scope='module')
def trained(averaged_tiny_ssd):
  """create_estimator_and_inputs' dict of the trained model (read only).

  Added keys: `config` (the as-run pipeline.config) and `checkpoint`.
  """
  model_dir = averaged_tiny_ssd['model_dir']
  parts = model_lib.create_estimator_and_inputs(
      tiny_ssd.run_config(model_dir),
      pipeline_config_path=averaged_tiny_ssd['as_run'])
  parts['config'] = averaged_tiny_ssd['as_run']
  parts['checkpoint'] = averaged_tiny_ssd['checkpoint']
  return parts


def _predict_input_fn(model_config, images):
  """The features PREDICT mode reads: preprocessed images and true shapes."""
  def input_fn():
    model = model_builder.build(model_config, is_training=False)
    preprocessed, true_image_shape = model.preprocess(
        tf.cast(tf.constant(images), tf.float32))
    return tf.data.Dataset.from_tensors({
        _IN.image: preprocessed, _IN.true_image_shape: true_image_shape})
  return input_fn


def _predict(parts, checkpoint):
  """Estimator.predict on image_inputs.images(): one batch of numpy predictions."""
  batches = list(parts['estimator'].predict(
      _predict_input_fn(parts['configs']['model'], image_inputs.images()),
      checkpoint_path=checkpoint, yield_single_examples=False))
  assert len(batches) == 1
  return batches[0]


def _export_servo(parts, directory, checkpoint):
  """Estimator.export_saved_model with the Servo exporter's receiver."""
  path = parts['estimator'].export_saved_model(
      directory, parts['predict_input_fn'], checkpoint_path=checkpoint)
  return path.decode() if isinstance(path, bytes) else path


@pytest.fixture(scope='module')
def predicted(trained):
  return _predict(trained, trained['checkpoint'])


@pytest.fixture(scope='module')
def exports(root, trained):
  """[(name, input type or 'servo', SavedModel directory)] of the checkpoint:
  the export_inference_graph CLI's (INPUT_TYPE) and the Servo export."""
  directory = str(root / INPUT_TYPE)
  cli = command_modules.run_command('export_inference_graph', [
      '--input_type=' + INPUT_TYPE,
      '--pipeline_config_path=' + trained['config'],
      '--trained_checkpoint_prefix=' + trained['checkpoint'],
      '--output_directory=' + directory])
  assert cli.returncode == 0, cli.stderr[-3000:]
  servo = _export_servo(trained, str(root / 'servo'), trained['checkpoint'])
  return [(INPUT_TYPE, INPUT_TYPE, os.path.join(directory, 'saved_model')),
          ('servo', 'servo', servo)]


@pytest.fixture(scope='module')
def averaged(root, trained):
  """Estimator.predict and Servo export with eval_config.use_moving_averages.

  The exporter's side of this switch is tested in test_exporter.py.

  Returns:
    (Estimator.predict's outputs, [(name, 'servo', SavedModel directory)]).
  """
  parts = model_lib.create_estimator_and_inputs(
      tf.estimator.RunConfig(model_dir=trained['estimator'].model_dir),
      hparams={'eval_with_moving_averages': True},
      pipeline_config_path=trained['config'])
  assert parts['configs']['eval_config'].use_moving_averages
  servo = _export_servo(parts, str(root / 'averaged_servo'),
                        trained['checkpoint'])
  return (_predict(parts, trained['checkpoint']),
          [('averaged_servo', 'servo', servo)])


# Serving in an interpreter that never imported od_estimator (a SavedModel
# that needed our Python, a py_func say, would fail there as in a server);
# there too, the saved_model_cli console script's main (`saved_model_cli
# show --all`) on one export, its printout kept. The SavedModels named in
# 'tf2_loaded' are served through TF2's tf.saved_model.load (which wraps
# the graph in a function, a few CPU seconds per model), the others in a
# TF1 session as `detect` and TF Serving run them. The exporter's exports
# through TF2's loading are tests/export/test_exporter.py's.
LOADER = textwrap.dedent('''
    import contextlib, io, json, sys
    import numpy as np
    import tensorflow as tf
    request = json.load(open(sys.argv[1]))
    examples = [bytes.fromhex(s) for s in request['examples']]
    # The batches each kind of SavedModel is fed, and its input's key. The
    # Servo receiver takes one serialized tf.Example per call.
    feeds = {'tf_example': [examples], 'servo': examples}

    def tf2_serve(directory, key, batches):
      serve = tf.saved_model.load(directory).signatures['serving_default']
      outputs = [serve(**{key: tf.constant(batch)}) for batch in batches]
      return ([{k: v.numpy() for k, v in output.items()}
               for output in outputs],
              {k: v.dtype.name for k, v in outputs[0].items()})

    def tf1_serve(directory, key, batches):
      with tf.Graph().as_default() as graph, tf.compat.v1.Session(
          graph=graph) as session:
        signature = tf.compat.v1.saved_model.loader.load(
            session, ['serve'], directory).signature_def['serving_default']
        fetches = {k: info.name for k, info in signature.outputs.items()}
        outputs = [session.run(fetches, {signature.inputs[key].name: batch})
                   for batch in batches]
      return outputs, {k: tf.as_dtype(info.dtype).name
                       for k, info in signature.outputs.items()}

    results = {}
    for name, kind, directory in request['saved_models']:
      input_key = request['servo_key'] if kind == 'servo' else 'inputs'
      serve = tf2_serve if name in request['tf2_loaded'] else tf1_serve
      outputs, dtypes = serve(directory, input_key, feeds[kind])
      for key in outputs[0]:
        results[name + '/' + key] = np.concatenate(
            [output[key] for output in outputs])
        results[name + '/dtype/' + key] = np.array(dtypes[key])
    from tensorflow.python.tools import saved_model_cli
    sys.argv = ['saved_model_cli', 'show', '--all', '--dir', request['cli_dir']]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      try:
        saved_model_cli.main()
      except SystemExit as stop:
        assert not stop.code, stop.code
    results['saved_model_cli/show'] = np.array(printed.getvalue())
    np.savez(request['out'], **results)
''')


@pytest.fixture(scope='module')
def served(root, exports, averaged):
  """Runs LOADER on every SavedModel; returns {name: {key: array}}."""
  images = image_inputs.images()
  request = {
      'saved_models': exports + averaged[1],
      'tf2_loaded': ['servo'],
      'cli_dir': dict((name, d) for name, _, d in exports)[INPUT_TYPE],
      'servo_key': inputs.SERVING_FED_EXAMPLE_KEY,
      'examples': [image_inputs.tf_example(image).hex() for image in images],
      'out': str(root / 'served.npz')}
  with open(str(root / 'request.json'), 'w') as f:
    json.dump(request, f)
  _wait(_start([sys.executable, '-c', LOADER,
               str(root / 'request.json')]))
  arrays = {}
  for name, value in np.load(request['out']).items():
    source, key = name.split('/', 1)
    arrays.setdefault(source, {})[key] = value
  return arrays


def _outputs(served, name):
  """One SavedModel's served outputs, without their dtype names."""
  return {k: v for k, v in served[name].items() if not k.startswith('dtype/')}


def _assert_same_outputs(outputs, expected):
  """Same keys, each within TOLERANCE (raw per-anchor outputs included)."""
  assert set(outputs) == set(expected)
  for key, value in expected.items():
    np.testing.assert_allclose(outputs[key], value, atol=TOLERANCE,
                               rtol=0, err_msg=key)


def test_estimator_predicts_one_based_classes(trained, predicted):
  assert trained['checkpoint'].endswith('model.ckpt-%d' % TRAIN_STEPS)
  assert REQUIRED_KEYS <= set(predicted)
  assert predicted['detection_boxes'].shape[:1] == (2,)
  assert predicted['detection_classes'].dtype == np.float32
  counts = predicted['num_detections'].astype(int)
  assert counts.min() > 0
  # Label map ids 1..NUM_CLASSES, not the model's 0-based classes.
  for image, count in enumerate(counts):
    classes = predicted['detection_classes'][image, :count]
    assert set(np.unique(classes)) <= set(range(1, NUM_CLASSES + 1))


@pytest.mark.parametrize('name', (INPUT_TYPE, 'servo'))
def test_export_serves_the_estimators_detections(served, predicted, name):
  _assert_same_outputs(_outputs(served, name), predicted)
  for key in REQUIRED_KEYS:
    assert str(served[name]['dtype/' + key]) == 'float32', key


def test_servo_export_matches_the_exporters_tf_example_export(served):
  _assert_same_outputs(_outputs(served, 'servo'),
                       _outputs(served, INPUT_TYPE))


def test_moving_averages_reach_predict_and_the_servo_export(
    served, predicted, averaged):
  averaged_predictions, _ = averaged
  # The averages (decay 0.5, one Adam step: half a step behind) differ from
  # the trained weights by far more than the tolerance, so the comparisons
  # tell them apart.
  assert np.abs(averaged_predictions['raw_detection_scores'] -
                predicted['raw_detection_scores']).max() > 10 * TOLERANCE
  _assert_same_outputs(_outputs(served, 'averaged_servo'),
                       averaged_predictions)


def test_saved_model_cli_shows_the_serving_signature(served):
  text = str(served['saved_model_cli']['show'])
  start = text.index("signature_def['serving_default']:")
  signature = text[start:]
  end = signature.find("signature_def['", 1)
  signature = signature if end < 0 else signature[:end]
  inputs_part, outputs_part = signature.split('output(s):', 1)
  assert inputs_part.count('tensor_info:') == 1
  assert "inputs['inputs'] tensor_info:" in inputs_part
  assert 'name: %s:0' % INPUT_TYPE in inputs_part
  for key in REQUIRED_KEYS:
    assert "outputs['%s'] tensor_info:" % key in outputs_part
    assert 'name: %s:0' % key in outputs_part
  assert 'Method name is: tensorflow/serving/predict' in signature
