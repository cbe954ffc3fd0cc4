"""export_tflite_graph_tf2: the original's TF2 route to TFLite.

A tiny TF2 SSD (the original's ssd_mobilenet_v2_320x320 sample config at
depth x0.25, 64x64, 3 classes), its fresh weights spread out for distinct
scores (tests/tflite_runs.py), is saved as a TF2 zoo model's checkpoint/
folder (ckpt-0, object-based, the original's keys). The command exports it
and converts the SavedModel as the original's documentation does; the
SavedModel and the TFLite model must have the signatures
tests/data/export_tflite_graph_tf2/ records of the original's, the
converted model the TFLite_Detection_PostProcess op, and both the
detections of the checkpoint's model.
"""
import contextlib
import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import __main__ as od_estimator_main
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.export import export_tflite_graph_lib_tf2
from od_estimator.export import export_tflite_ssd_graph_lib
from od_estimator.export import exporter_v2
from od_estimator.export import tflite_conversion
from od_estimator.utils import object_checkpoint_writer
from tests import command_modules
from tests import tflite_runs
from tests import tiny_tf2_ssd
from tests import upstream_folder

COMMAND = 'compat.export_tflite_graph_tf2'
SIZE = 64
NUM_CLASSES = 3
MAX_DETECTIONS = 10
ORIGINAL = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'data', 'export_tflite_graph_tf2',
                        'original.json')
# output_N of the signatures: the op's outputs, reversed as the original's.
NUM, SCORES, CLASSES, BOXES = ('output_%d' % i for i in range(4))


def _recorded():
  with open(ORIGINAL) as f:
    return json.load(f)


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
  """The config, a TF2 checkpoint folder, the model's own detections and
  the command's export (with --convert) of that folder."""
  root = tmp_path_factory.mktemp('tflite_tf2')
  pipeline_config = config_util.read_pipeline_config(
      upstream_folder.config_path(tiny_tf2_ssd.CONFIG, tf2=True),
      tiny_tf2_ssd.TINY)
  config_util.save_pipeline_config(pipeline_config, str(root))
  image = np.random.RandomState(1).uniform(
      -1.0, 1.0, [1, SIZE, SIZE, 3]).astype(np.float32)
  with tf.Graph().as_default():
    model = model_builder.build(pipeline_config.model, is_training=False,
                                add_summaries=False)
    images = tf.compat.v1.placeholder(tf.float32, [1, SIZE, SIZE, 3])
    detections = model.postprocess(model.predict(images, None), None)
    spread = tflite_runs.spread_out_weights()
    variables = tf.compat.v1.global_variables()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(spread)
      values = session.run({v.op.name: v for v in variables})
      reference = session.run(detections, {images: image})
  checkpoint_dir = str(root / 'zoo_model' / 'checkpoint')
  object_checkpoint_writer.save_numbered(
      checkpoint_dir, exporter_v2.checkpoint_entries(
          [v.op.name for v in variables], values), 0)
  export_dir = str(root / 'export')
  cli = command_modules.run_command(COMMAND, [
      '--pipeline_config_path=' + str(root / 'pipeline.config'),
      '--trained_checkpoint_dir=' + checkpoint_dir,
      '--output_directory=' + export_dir, '--convert'])
  assert cli.returncode == 0, cli.stderr[-3000:]
  return {'root': root, 'config': pipeline_config, 'image': image,
          'checkpoint_dir': checkpoint_dir, 'reference': reference,
          'export_dir': export_dir}


@pytest.fixture(scope='module')
def loaded(setup):
  """The command's SavedModel, loaded once for the module's tests."""
  return tf.saved_model.load(os.path.join(setup['export_dir'], 'saved_model'))


@pytest.fixture(scope='module')
def served(setup, loaded):
  """The SavedModel's serving_default on the setup image ({output_N: array})."""
  signature = loaded.signatures['serving_default']
  return {key: value.numpy() for key, value in signature(
      input=tf.constant(setup['image'])).items()}


def _interpreter(model):
  interpreter = tf.lite.Interpreter(model_content=model)
  interpreter.allocate_tensors()
  return interpreter


def _tflite_outputs(interpreter, image):
  return interpreter.get_signature_runner()(input=image)


def _detections(outputs):
  """(boxes [n, 4], classes [n] int, scores [n]) of output_0 .. output_3."""
  count = int(outputs[NUM][0])
  return (outputs[BOXES][0, :count], outputs[CLASSES][0, :count].astype(int),
          outputs[SCORES][0, :count])


@pytest.fixture(scope='module')
def converted(setup):
  """The command's detect.tflite in the interpreter."""
  with open(os.path.join(setup['export_dir'],
                         tflite_conversion.TFLITE_NAME), 'rb') as f:
    return _interpreter(f.read())


def test_saved_model_is_signed_as_the_originals(setup, loaded):
  recorded = _recorded()
  export_dir = setup['export_dir']
  found = sorted(os.path.relpath(os.path.join(folder, name), export_dir)
                 for folder, _, names in os.walk(export_dir)
                 for name in names)
  assert found == sorted(recorded['layout'] + [tflite_conversion.TFLITE_NAME])
  assert list(loaded.signatures) == recorded['saved_model_signatures']
  signature = loaded.signatures['serving_default']
  inputs = {key: [spec.dtype.name, spec.shape.as_list()]
            for key, spec in signature.structured_input_signature[1].items()}
  assert inputs == recorded['saved_model_inputs']
  # The original's outputs are scalar placeholders; ours have the op's
  # shapes, those of its converted model.
  outputs = {key: [spec.dtype.name, spec.shape.as_list()]
             for key, spec in signature.structured_outputs.items()}
  assert outputs == {key: ['float32', shape] for key, shape in
                     recorded['tflite_outputs'].items()}


def test_converted_model_ends_in_the_postprocess_op(converted):
  recorded = _recorded()
  # pylint: disable=protected-access
  ops = [op['op_name'] for op in converted._get_ops_details()]
  assert ops.count(recorded['tflite_postprocess_op']) == 1
  assert not [op for op in ops if 'NON_MAX_SUPPRESSION' in op]
  assert converted.get_signature_list() == recorded['tflite_signatures']
  (detail,) = converted.get_input_details()
  assert detail['name'] == recorded['tflite_input']
  assert detail['dtype'] == np.float32
  assert detail['shape'].tolist() == [1, SIZE, SIZE, 3]


def test_tflite_detections_are_the_saved_models(setup, converted, served):
  lite = _tflite_outputs(converted, setup['image'])
  assert {key: list(value.shape) for key, value in lite.items()} == (
      _recorded()['tflite_outputs'])
  boxes, classes, scores = _detections(lite)
  # The config's score threshold (1e-8) keeps every box.
  assert len(scores) == MAX_DETECTIONS
  assert np.all(np.diff(scores) <= 0) and np.all((scores > 0) & (scores < 1))
  assert np.all((classes >= 0) & (classes < NUM_CLASSES))
  assert np.all(boxes[:, 2:] >= boxes[:, :2])
  np.testing.assert_array_equal(lite[NUM], served[NUM])
  missing = tflite_runs.unmatched((boxes, classes, scores),
                                  _detections(served), MAX_DETECTIONS, 1e-5)
  assert not missing


def test_detections_are_the_checkpoints_models(setup, served):
  """The best detection is the model's own (restored from the TF2 folder):
  same score and class; the model clips its box to the image, the op not."""
  reference = setup['reference']
  boxes, classes, scores = _detections(served)
  assert scores[0] == pytest.approx(reference['detection_scores'][0, 0],
                                    abs=1e-5)
  assert classes[0] == reference['detection_classes'][0, 0]
  np.testing.assert_allclose(np.clip(boxes[0], 0.0, 1.0),
                             reference['detection_boxes'][0, 0], atol=1e-5)


class _Postprocess(tf.Module):
  """The postprocessing function alone, on random raw outputs."""

  def __init__(self, attrs, raw_outputs):
    super().__init__()
    self._raw_outputs = raw_outputs
    self._postprocess = export_tflite_graph_lib_tf2.postprocess_function(
        attrs)
    self.__call__ = tf.function(self._call, input_signature=[
        tf.TensorSpec([1], tf.float32, name='input')])

  def _call(self, scale):
    box_encodings, class_predictions, anchors = self._raw_outputs
    return self._postprocess(box_encodings * scale, class_predictions,
                             anchors)[::-1]


def test_regular_nms_converts_to_the_same_detections(tmp_path):
  """--ssd_use_regular_nms: per-class NMS, in TensorFlow and in TFLite."""
  rng = np.random.RandomState(3)
  num_anchors, num_kept = 300, 5
  class_predictions = rng.uniform(0, 0.5, [1, num_anchors, NUM_CLASSES + 1])
  # Anchor 7 is the best of classes 1 and 2 (0-based): regular NMS reports
  # it twice, fast NMS once.
  class_predictions[0, 7, 2:] = [0.99, 0.98]
  raw_outputs = (
      rng.normal(0, 0.5, [1, num_anchors, 4]).astype(np.float32),
      class_predictions.astype(np.float32),
      np.concatenate([rng.uniform(0.2, 0.8, [num_anchors, 2]),
                      rng.uniform(0.05, 0.3, [num_anchors, 2])],
                     axis=1).astype(np.float32))
  attrs = export_tflite_ssd_graph_lib.postprocessing_attrs(
      num_kept, 1, 1e-8, 0.6, NUM_CLASSES, {
          'y_scale': 10.0, 'x_scale': 10.0, 'h_scale': 5.0, 'w_scale': 5.0},
      use_regular_nms=True)
  del attrs['detections_per_class']
  module = _Postprocess(attrs, raw_outputs)
  path = str(tmp_path / 'saved_model')
  tf.saved_model.save(module, path,
                      signatures=module.__call__.get_concrete_function())
  scale = np.ones([1], np.float32)
  served = dict(zip((NUM, SCORES, CLASSES, BOXES),
                    [value.numpy() for value in module.__call__(scale)]))
  # The original's documented conversion, without options.
  lite = _tflite_outputs(_interpreter(
      tf.lite.TFLiteConverter.from_saved_model(path).convert()), scale)
  assert lite[BOXES].shape == (1, num_kept, 4) and lite[NUM][0] == num_kept
  boxes, classes, scores = _detections(lite)
  assert classes[:2].tolist() == [1, 2]
  np.testing.assert_array_equal(boxes[0], boxes[1])
  assert not tflite_runs.unmatched((boxes, classes, scores),
                                   _detections(served), num_kept, 1e-5)


@pytest.mark.parametrize('flags, message', [
    (['--centernet_include_keypoints'],
     '--centernet_include_keypoints: od_estimator has no CenterNet'),
    (['--keypoint_label_map_path=labels.txt'],
     '--keypoint_label_map_path: od_estimator has no CenterNet'),
    (['--max_detections=0'], '--max_detections must be positive, got 0.'),
    ([], 'saved_model'),  # the export already there, without --overwrite
])
def test_errors_are_one_line(setup, flags, message):
  cli = command_modules.run_command(COMMAND, [
      '--pipeline_config_path=' + str(setup['root'] / 'pipeline.config'),
      '--trained_checkpoint_dir=' + setup['checkpoint_dir'],
      '--output_directory=' + setup['export_dir']] + flags)
  assert cli.returncode == 1
  lines = cli.stderr.strip().splitlines()
  assert len(lines) == 1 and message in lines[0], cli.stderr


def test_help_is_the_od_estimator_subcommands():
  command_modules.import_command(COMMAND)
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    assert od_estimator_main.main(['export_tflite_graph_tf2', '--help']) == 0
  for flag in ('pipeline_config_path', 'trained_checkpoint_dir',
               'output_directory', 'config_override', 'max_detections',
               'ssd_use_regular_nms', 'centernet_include_keypoints',
               'keypoint_label_map_path', 'overwrite', 'convert'):
    assert '--' + flag in out.getvalue() or '--[no]' + flag in out.getvalue()
  assert 'TFLiteConverter.from_saved_model' in out.getvalue()
  assert 'output_3  boxes' in out.getvalue()
