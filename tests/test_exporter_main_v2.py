"""exporter_main_v2: the original's TF2 export layout on our exporter.

A tiny TF2 SSD (the original's ssd_mobilenet_v2_320x320 sample config at
depth x0.25, 64x64, 3 classes) starts from a training checkpoint laid out
as the original's TF2 loop writes it (tests/tf2_checkpoints.py: the keys
and Keras names of tests/data/tf2_checkpoint_keys/, shapes of this tiny
model, random values). The command exports it from that TF2 directory; a
second export reads the same weights re-saved as our TF1 `model.ckpt-N`.
Both must serve Estimator.predict's detections on the same image, with
the signature tests/data/exporter_main_v2/ records of the original's
exports, and write a checkpoint/ckpt-0 with the original's keys
that our fine-tuning restores with nothing skipped.
"""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import detect
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.core import standard_fields as fields
from od_estimator.estimator import fine_tune
from od_estimator.estimator import model_lib
from od_estimator.estimator import moving_averages
from od_estimator.export import exporter_v2
from od_estimator.export import original_object_paths
from od_estimator.utils import checkpoint_contents
from tests import command_modules
from tests import fast_graphs
from tests import image_inputs
from tests import tf2_checkpoints
from tests import tiny_ssd
from tests import tiny_tf2_ssd

CONFIG = tiny_tf2_ssd.CONFIG
STEP = 2
TOLERANCE = 1e-4
SIGNATURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                          'exporter_main_v2', 'signatures.json')
_SIDE_FLAGS = ['--use_side_inputs', '--side_input_shapes=1',
               '--side_input_names=a', '--side_input_types=tf.float32']


def _recorded(input_type):
  with open(SIGNATURES) as f:
    return json.load(f)[input_type]


@pytest.fixture(scope='module')
def root(tmp_path_factory):
  return tmp_path_factory.mktemp('exporter_main_v2')


@pytest.fixture(scope='module')
def config(root):
  """The tiny model's pipeline.config path."""
  return tiny_tf2_ssd.write_config(root)


@pytest.fixture(scope='module')
def training_model(config):
  """(graph, model): the tiny model built once, as fine-tuning builds it
  (training mode), with its global step. Its variables give the TF2
  checkpoint's shapes and are re-saved as the TF1 checkpoint."""
  model_config = config_util.get_configs_from_pipeline_file(config)['model']
  with fast_graphs.new_graph() as graph:
    model = model_builder.build(model_config, is_training=True)
    model.predict(*model.preprocess(tf.zeros([1, 64, 64, 3])))
    shapes = {v.op.name: v.shape.as_list()
              for v in tf.compat.v1.global_variables()}
    tf.compat.v1.train.get_or_create_global_step()
  return graph, model, shapes


@pytest.fixture(scope='module')
def tf2_dir(root, config, training_model):
  """A TF2 training directory: ckpt-1 at step STEP and its state file."""
  directory = str(root / 'tf2_train')
  tiny_tf2_ssd.write_training_folder(directory, config, [STEP],
                                     shapes=training_model[2])
  return directory


@pytest.fixture(scope='module')
def tf1_checkpoint(root, tf2_dir, training_model):
  """The TF2 checkpoint's weights re-saved as our model.ckpt-STEP."""
  graph = training_model[0]
  with tf.compat.v1.Session(graph=graph) as session, graph.as_default():
    moving_averages.restore(session, False,
                            tf.train.latest_checkpoint(tf2_dir))
    return tf.compat.v1.train.Saver().save(
        session, str(root / 'tf1_train' / ('model.ckpt-%d' % STEP)))


@pytest.fixture(scope='module')
def exports(root, config, tf2_dir, tf1_checkpoint):
  """{name: (input type, export directory)}: the command's export of the TF2
  directory, and exporter_v2's of the TF1 one."""
  tf2_export = str(root / 'from_tf2')
  cli = command_modules.run_command('exporter_main_v2', [
      '--input_type=image_tensor', '--pipeline_config_path=' + config,
      '--trained_checkpoint_dir=' + tf2_dir,
      '--output_directory=' + tf2_export])
  assert cli.returncode == 0, cli.stderr[-3000:]
  tf1_export = str(root / 'from_tf1')
  exporter_v2.export_inference_graph(
      'encoded_image_string_tensor',
      config_util.read_pipeline_config(config),
      os.path.dirname(tf1_checkpoint), tf1_export)
  return {'tf2': ('image_tensor', tf2_export),
          'tf1': ('encoded_image_string_tensor', tf1_export)}


@pytest.fixture(scope='module')
def predicted(config, tf1_checkpoint):
  """Estimator.predict of the first test image: {key: [1, ...] array}."""
  parts = model_lib.create_estimator_and_inputs(
      tiny_ssd.run_config(os.path.dirname(tf1_checkpoint)),
      pipeline_config_path=config)
  model_config = parts['configs']['model']
  image = image_inputs.images()[:1]

  def input_fn():
    model = model_builder.build(model_config, is_training=False)
    preprocessed, true_image_shape = model.preprocess(
        tf.cast(tf.constant(image), tf.float32))
    return tf.data.Dataset.from_tensors({
        fields.InputDataFields.image: preprocessed,
        fields.InputDataFields.true_image_shape: true_image_shape})
  batches = list(parts['estimator'].predict(
      input_fn, checkpoint_path=tf1_checkpoint, yield_single_examples=False))
  assert len(batches) == 1
  return batches[0]


def serve(directory, input_type):
  """The SavedModel called as TF2 serving code calls it, on the first image:
  {output key: array}."""
  return _load_and_serve(directory, input_type)[0]


def _load_and_serve(directory, input_type):
  """serve's call, and the SavedModel's serving_default signature."""
  image = image_inputs.images()[:1]
  feed = {'image_tensor': tf.constant(image),
          'encoded_image_string_tensor': tf.constant(
              [image_inputs.png(image[0])])}[input_type]
  detector = tf.saved_model.load(os.path.join(directory, 'saved_model'))
  called = {key: value.numpy() for key, value in detector(feed).items()}
  signature = detector.signatures['serving_default']
  signed = signature(input_tensor=feed)
  for key, value in signed.items():
    np.testing.assert_array_equal(value.numpy(), called[key], err_msg=key)
  return called, signature


@pytest.fixture(scope='module')
def served(exports):
  """{name: _load_and_serve of that export}: each SavedModel loaded once."""
  return {name: _load_and_serve(directory, input_type)
          for name, (input_type, directory) in exports.items()}


@pytest.mark.parametrize('name', ['tf2', 'tf1'])
def test_layout_is_the_originals(exports, name):
  _, directory = exports[name]
  found = sorted(os.path.relpath(os.path.join(folder, file), directory)
                 for folder, _, files in os.walk(directory)
                 for file in files)
  assert found == _recorded('image_tensor')['layout']


@pytest.mark.parametrize('name', ['tf2', 'tf1'])
def test_signature_is_the_originals(exports, served, name):
  input_type = exports[name][0]
  signature = served[name][1]
  inputs = {key: [spec.dtype.name, spec.shape.as_list()]
            for key, spec in signature.structured_input_signature[1].items()}
  outputs = {key: [spec.dtype.name, spec.shape.as_list()]
             for key, spec in signature.structured_outputs.items()}
  recorded = _recorded(input_type)
  assert inputs == recorded['inputs']
  assert sorted(outputs) == sorted(recorded['outputs'])
  for key, (dtype, shape) in outputs.items():
    recorded_dtype, recorded_shape = recorded['outputs'][key]
    assert dtype == recorded_dtype, key
    # Where the original leaves a size unknown (the anchors of string
    # inputs), ours may know it.
    assert len(shape) == len(recorded_shape), key
    assert all(theirs in (None, size)
               for size, theirs in zip(shape, recorded_shape)), key


@pytest.mark.parametrize('name', ['tf2', 'tf1'])
def test_export_serves_the_estimators_detections(served, predicted, name):
  outputs = served[name][0]
  assert outputs['num_detections'][0] > 0
  for key, value in predicted.items():
    np.testing.assert_allclose(outputs[key], value, atol=TOLERANCE, rtol=0,
                               err_msg=key)
  # What Estimator.predict leaves out, the original's exports serve.
  assert set(outputs) - set(predicted) <= {'detection_anchor_indices'}
  indices = outputs['detection_anchor_indices'][0].astype(int)
  np.testing.assert_allclose(
      outputs['raw_detection_boxes'][0][indices][:5],
      outputs['detection_boxes'][0][:5], atol=TOLERANCE)


@pytest.mark.parametrize('name', ['tf2', 'tf1'])
def test_detect_runs_the_export(exports, served, name, tmp_path):
  check_detect_runs_the_export(exports[name][1], served[name][0], tmp_path)


def check_detect_runs_the_export(directory, served, tmp_path):
  """`od-estimator detect` on the first test image writes the export's
  detections `served` (serve's), with the label map's ids."""
  image = image_inputs.images()[0]
  (tmp_path / 'image.png').write_bytes(image_inputs.png(image))
  label_map = tmp_path / 'label_map.pbtxt'
  label_map.write_text(''.join("item { id: %d name: 'c%d' }\n" % (i, i)
                               for i in (1, 2, 3)))
  assert detect.main([
      '--saved_model_dir=' + directory, '--label_map_path=%s' % label_map,
      '--input=%s' % (tmp_path / 'image.png'),
      '--output_dir=%s' % (tmp_path / 'out'), '--min_score_threshold=0']) == 0
  with open(str(tmp_path / 'out' / detect.DETECTIONS_FILE)) as f:
    found = json.load(f)
  count = int(served['num_detections'][0])
  assert count > 0 and len(found) == count
  np.testing.assert_allclose([d['score'] for d in found],
                             served['detection_scores'][0][:count],
                             atol=TOLERANCE)
  assert [d['category_id'] for d in found] == (
      served['detection_classes'][0][:count].astype(int).tolist())


def _model_facts():
  """(key, Keras name without depths) of the original's model values."""
  return sorted((fact.key, tiny_tf2_ssd.without_depth(fact.keras_name))
                for fact in tf2_checkpoints.facts(CONFIG)
                if fact.key.startswith('model/') and
                '/.OPTIMIZER_SLOT/' not in fact.key)


@pytest.mark.parametrize('name', ['tf2', 'tf1'])
def test_exported_checkpoint_has_the_originals_keys(exports, name):
  _, directory = exports[name]
  prefix = tf.train.latest_checkpoint(os.path.join(directory, 'checkpoint'))
  assert os.path.basename(prefix) == 'ckpt-0'
  values = checkpoint_contents.read(prefix)
  model = sorted((v.key, tiny_tf2_ssd.without_depth(v.keras_name)) for v in values
                 if v.key.startswith('model/'))
  assert model == _model_facts()
  assert {v.key.split('/')[0] for v in values} == {'model', 'save_counter'}


def test_exported_checkpoint_fine_tunes_with_nothing_skipped(
    exports, training_model, tf2_dir):
  _, directory = exports['tf2']
  prefix = tf.train.latest_checkpoint(os.path.join(directory, 'checkpoint'))
  graph, model, _ = training_model
  with graph.as_default():
    for kind in ('detection', 'full'):
      matched = fine_tune.match_prefix(model, kind, prefix, True)
      assert not matched.missing and not matched.mismatched, kind
      assert not matched.left_out, kind
    # `full` restores every value the original's model has.
    assert len(matched.available) == len(_model_facts())
    # The values are the trained checkpoint's.
    original = tf.train.load_checkpoint(tf.train.latest_checkpoint(tf2_dir))
    exported = tf.train.load_checkpoint(prefix)
    for key in list(matched.available)[:20]:
      np.testing.assert_array_equal(exported.get_tensor(key),
                                    original.get_tensor(key), err_msg=key)


@pytest.mark.parametrize('flags, message', [
    (['--input_type=jpeg'], '--input_type=jpeg is not supported'),
    (_SIDE_FLAGS + ['--input_type=tf_example'],
     '--use_side_inputs takes --input_type=image_tensor only'),
    (_SIDE_FLAGS, '--use_side_inputs: this model takes no side inputs'),
])
def test_errors_are_one_line(root, config, tf2_dir, flags, message):
  output = str(root / 'refused')
  cli = command_modules.run_command('exporter_main_v2', [
      '--pipeline_config_path=' + config,
      '--trained_checkpoint_dir=' + tf2_dir,
      '--output_directory=' + output] + flags)
  assert cli.returncode == 1
  lines = cli.stderr.strip().splitlines()
  assert len(lines) == 1 and message in lines[0], cli.stderr
  assert not os.path.exists(os.path.join(output, 'saved_model'))


def test_training_directory_is_refused_as_output(config, tf2_dir):
  cli = command_modules.run_command('exporter_main_v2', [
      '--pipeline_config_path=' + config,
      '--trained_checkpoint_dir=' + tf2_dir,
      '--output_directory=' + tf2_dir])
  assert cli.returncode == 1
  assert 'holds training checkpoints (e.g. ckpt-1.index)' in cli.stderr


def test_help_lists_the_originals_flags():
  cli = command_modules.run_command('exporter_main_v2', ['--help'])
  assert cli.returncode == 0
  for flag in ('input_type', 'pipeline_config_path', 'trained_checkpoint_dir',
               'output_directory', 'config_override', 'use_side_inputs',
               'side_input_shapes', 'side_input_types', 'side_input_names'):
    assert '--' + flag in cli.stdout or '--[no]' + flag in cli.stdout
  assert 'input_tensor' in cli.stdout


def test_models_of_other_names_have_no_original_paths():
  keras_head = 'BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/bias'
  assert original_object_paths.original_paths(['Conv1/kernel', keras_head])
  # A TF1 (slim) model: its values are keyed by variable name instead.
  assert original_object_paths.original_paths(
      ['Conv1/kernel', 'BoxPredictor_0/BoxEncodingPredictor/biases']) is None
  # A Faster R-CNN outside the C4 layout (the FPN's dense box head).
  c4 = ['conv1_conv/kernel', 'conv5_block1_1_conv/kernel', 'RPNConv/kernel']
  assert original_object_paths.original_paths(c4)
  assert original_object_paths.original_paths(c4 + ['dense/kernel']) is None
