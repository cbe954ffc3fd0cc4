"""--bfloat16 at export (export/bfloat16_graph.py): the oneDNN bfloat16
rewrite baked into the exported graph; float32 exports untouched.

One tiny TF2 SSD (tests/tiny_tf2_ssd.py: MobileNet v2 x0.25, 64x64, with
depthwise and dense convolutions) and one random TF2 checkpoint of it are
exported four ways: exporter_main_v2 and export_inference_graph, each in
float32 (the default, from a config saying train_config.use_bfloat16) and
with --bfloat16 (the commands, in-process).
"""
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from od_estimator.config import config_util
from od_estimator.estimator import cpu_bfloat16
from od_estimator.export import bfloat16_graph
from od_estimator.export import exporter
from od_estimator.export import exporter_v2
from tests import image_inputs
from tests import log_capture
from tests import tiny_tf2_ssd
from tests.command_modules import run_command

BFLOAT16 = tf.bfloat16.as_datatype_enum
needs_bfloat16 = pytest.mark.skipif(
    not cpu_bfloat16.cpu_has_bfloat16(),
    reason='this CPU has no bfloat16 instructions')
# command -> (its checkpoint flag, the signature's image input).
COMMANDS = {'exporter_main_v2': ('--trained_checkpoint_dir', 'input_tensor'),
            'export_inference_graph': ('--trained_checkpoint_prefix',
                                       'inputs')}


@pytest.fixture(scope='module')
def exports(tmp_path_factory):
  """{(command, 'float32' or 'bfloat16'): export directory}."""
  root = tmp_path_factory.mktemp('bfloat16_export')
  config = tiny_tf2_ssd.write_config(root)
  checkpoint_dir = str(root / 'train')
  tiny_tf2_ssd.write_training_folder(checkpoint_dir, config, [1])
  # Float32 without --bfloat16, whatever train_config says.
  pipeline = config_util.read_pipeline_config(
      config, 'train_config { use_bfloat16: true }')
  directories = {}
  for command, (checkpoint_flag, _) in COMMANDS.items():
    directories[command, 'float32'] = str(root / command / 'float32')
    directories[command, 'bfloat16'] = str(root / command / 'bfloat16')
    result = run_command(command, [
        '--pipeline_config_path=' + config,
        checkpoint_flag + '=' + checkpoint_dir,
        '--output_directory=' + directories[command, 'bfloat16'],
        '--bfloat16'])
    assert result.returncode == 0, result.stderr[-3000:]
  exporter_v2.export_inference_graph(
      'image_tensor', pipeline, checkpoint_dir,
      directories['exporter_main_v2', 'float32'])
  exporter.export_inference_graph(
      'image_tensor', pipeline, checkpoint_dir,
      directories['export_inference_graph', 'float32'])
  return directories


def _saved_model(directory):
  saved_model = saved_model_pb2.SavedModel()
  with open(os.path.join(directory, 'saved_model', 'saved_model.pb'),
            'rb') as f:
    saved_model.ParseFromString(f.read())
  return saved_model.meta_graphs[0]


def _graph_nodes(directory):
  """Every node of the SavedModel's graph and of its functions."""
  graph_def = _saved_model(directory).graph_def
  return list(graph_def.node) + [
      node for function in graph_def.library.function
      for node in function.node_def]


def _dtypes_of(nodes, op):
  return {node.attr['T'].type for node in nodes if node.op == op}


def _frozen_nodes(directory):
  graph_def = tf.compat.v1.GraphDef()
  with open(os.path.join(directory, 'frozen_inference_graph.pb'), 'rb') as f:
    graph_def.ParseFromString(f.read())
  return list(graph_def.node)


@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_float32_export_has_no_bfloat16(exports, command):
  nodes = _graph_nodes(exports[command, 'float32'])
  assert _dtypes_of(nodes, 'Conv2D') == {tf.float32.as_datatype_enum}
  assert not bfloat16_graph.has_bfloat16(nodes)


def test_float32_frozen_graph_has_no_bfloat16(exports):
  assert not bfloat16_graph.has_bfloat16(_frozen_nodes(
      exports['export_inference_graph', 'float32']))


@needs_bfloat16
@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_bfloat16_export_convolves_in_bfloat16(exports, command):
  nodes = _graph_nodes(exports[command, 'bfloat16'])
  assert _dtypes_of(nodes, 'Conv2D') == {BFLOAT16}
  # As in training (cpu_bfloat16): depthwise convolutions stay float32.
  assert _dtypes_of(nodes, 'DepthwiseConv2dNative') == {
      tf.float32.as_datatype_enum}


@needs_bfloat16
def test_bfloat16_frozen_graph_is_the_saved_models(exports):
  directory = exports['export_inference_graph', 'bfloat16']
  assert _dtypes_of(_frozen_nodes(directory), 'Conv2D') == {BFLOAT16}


def _signature(directory):
  """serving_default's inputs and outputs: {key: (name, dtype, shape)}."""
  signature = _saved_model(directory).signature_def['serving_default']
  return {side: {key: (info.name, info.dtype, str(info.tensor_shape))
                 for key, info in infos.items()}
          for side, infos in (('inputs', signature.inputs),
                              ('outputs', signature.outputs))}


@needs_bfloat16
@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_signature_is_the_float32_exports(exports, command):
  bfloat16 = _signature(exports[command, 'bfloat16'])
  assert bfloat16 == _signature(exports[command, 'float32'])
  assert {dtype for _, dtype, _ in bfloat16['outputs'].values()} == {
      tf.float32.as_datatype_enum}


def _serve(directory, input_key):
  serving = tf.saved_model.load(os.path.join(
      directory, 'saved_model')).signatures['serving_default']
  outputs = serving(**{input_key: tf.constant(image_inputs.images()[:1])})
  return {key: value.numpy() for key, value in outputs.items()}


@needs_bfloat16
@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_bfloat16_detections_close_to_float32(exports, command):
  input_key = COMMANDS[command][1]
  float32 = _serve(exports[command, 'float32'], input_key)
  bfloat16 = _serve(exports[command, 'bfloat16'], input_key)
  assert sorted(bfloat16) == sorted(float32)
  # Per anchor, before non-max suppression (whose choices may flip between
  # near ties): bfloat16's 8-bit mantissa, ~0.4% a value, through the net
  # (measured: at most 3e-4 on these weights, scores 0.41 to 0.60).
  for key in ('raw_detection_boxes', 'raw_detection_scores'):
    assert np.isfinite(bfloat16[key]).all()
    np.testing.assert_allclose(bfloat16[key], float32[key], atol=0.005,
                               err_msg=key)
  np.testing.assert_allclose(bfloat16['detection_scores'][0, 0],
                             float32['detection_scores'][0, 0], atol=0.005)


def test_cpu_without_bfloat16_exports_float32_and_says_so(monkeypatch):
  monkeypatch.setattr(cpu_bfloat16, 'cpu_flags', lambda: {'avx512f'})
  with log_capture.absl_messages() as messages:
    assert not bfloat16_graph.wanted(True)
  notes = [m for m in messages if m.startswith('bfloat16')]
  assert len(notes) == 1 and 'exporting float32' in notes[0], notes


@needs_bfloat16
def test_graph_the_rewrite_leaves_float32_is_exported_as_it_was():
  with tf.Graph().as_default() as graph:
    images = tf.compat.v1.placeholder(tf.float32, [1, 4], name='images')
    tf.identity(tf.reduce_sum(images * 2.0), name='total')
  graph_def = graph.as_graph_def()
  with log_capture.absl_messages() as messages:
    assert bfloat16_graph.rewrite(graph_def, ['total']) is graph_def
  assert any('exporting float32' in m for m in messages), messages


@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_commands_offer_the_flag(command):
  result = run_command(command, ['--help'])
  assert result.returncode == 0
  assert '--[no]bfloat16' in result.stdout
  assert 'use_bfloat16' in result.stdout
