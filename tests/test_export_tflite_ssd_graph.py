"""export_tflite_ssd_graph_lib and the export_tflite_ssd_graph CLI.

The model is the tiny real SSD of tests/tiny_ssd.py (MobileNet v2 x0.25,
64x64). Its checkpoint comes from a freshly initialized graph whose
weights are redrawn variance-preserving, so that scores and boxes are spread
out enough for a stable ranking. The reference is that same graph's predict()
and postprocess() run on the same normalized image; the exports are
converted with the TFLite converter and run in the TFLite interpreter.
"""
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from od_estimator import errors
from od_estimator.export import export_tflite_ssd_graph_lib
from od_estimator.export import tflite_conversion
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from tests import fast_graphs
from tests import tflite_runs
from tests import command_modules
from tests import tiny_ssd

SIZE = 64
NUM_CLASSES = 3  # of the demo config
INPUT = tflite_runs.INPUT
POSTPROCESS = tflite_runs.POSTPROCESS
POSTPROCESS_OUTPUTS = tflite_runs.POSTPROCESS_OUTPUTS
RAW_OUTPUTS = ['raw_outputs/box_encodings', 'raw_outputs/class_predictions']


def _pipeline_config(data_dir=None):
  """The tiny SSD's config; with data_dir, evaluating TFRecords written there."""
  configs = config_util.get_configs_from_pipeline_file(tiny_ssd.DEMO_CONFIG)
  configs = config_util.merge_external_params_with_configs(
      configs, config_util.parse_hparams_overrides(tiny_ssd.TINY_OVERRIDES))
  pipeline_config = config_util.create_pipeline_proto_from_configs(configs)
  if data_dir is not None:
    _, val, label_map = tiny_ssd.write_data(data_dir, num_train=2, num_val=8)
    reader = pipeline_config.eval_input_reader[0]
    reader.tf_record_input_reader.input_path[:] = [val]
    reader.label_map_path = label_map
  return pipeline_config


def _write_checkpoint_and_reference(pipeline_config, prefix, image):
  """Saves a fresh model's weights; returns its outputs on `image`."""
  # Built with identity hashing, as the exporter builds its graph.
  with fast_graphs.new_graph() as graph:
    model = model_builder.build(pipeline_config.model, is_training=False,
                                add_summaries=False)
    images = tf.compat.v1.placeholder(tf.float32, [1, SIZE, SIZE, 3])
    predictions = model.predict(images, true_image_shapes=None)
    detections = model.postprocess(predictions, true_image_shapes=None)
    tf.compat.v1.train.get_or_create_global_step()
    spread = tflite_runs.spread_out_weights()
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(spread)
      tf.compat.v1.train.Saver().save(sess, prefix)
      predicted, detected = sess.run(
          [predictions, detections], feed_dict={images: image})
  reference = {key: predicted[key] for key in
               ('box_encodings', 'class_predictions_with_background',
                'anchors')}
  reference.update(detected)
  return reference


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp('tflite')
  pipeline_config = _pipeline_config(root / 'data')
  image = np.random.RandomState(1).uniform(
      -1.0, 1.0, [1, SIZE, SIZE, 3]).astype(np.float32)
  prefix = str(root / 'train' / 'model.ckpt-0')
  reference = _write_checkpoint_and_reference(pipeline_config, prefix, image)
  config_path = str(root / 'pipeline.config')
  config_util.save_pipeline_config(pipeline_config, str(root))
  export_dir = str(root / 'postprocess')
  export_tflite_ssd_graph_lib.export_tflite_graph(
      pipeline_config, prefix, export_dir, add_postprocessing_op=True,
      max_detections=10, max_classes_per_detection=1)
  return {'root': root, 'config': pipeline_config, 'config_path': config_path,
          'prefix': prefix, 'image': image, 'reference': reference,
          'export_dir': export_dir}


def _graph_def(path):
  graph_def = tf.compat.v1.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  return graph_def


@pytest.fixture(scope='module')
def float_model(setup):
  """The float TFLite model (bytes) of the postprocessing export, converted
  once for the module's tests."""
  return tflite_runs.convert_float(
      os.path.join(setup['export_dir'], 'tflite_graph.pb'),
      POSTPROCESS_OUTPUTS, SIZE)


def _center_size(boxes):
  """ymin, xmin, ymax, xmax -> ycenter, xcenter, height, width (numpy)."""
  ymin, xmin, ymax, xmax = boxes.T
  return np.stack([(ymin + ymax) / 2, (xmin + xmax) / 2, ymax - ymin,
                   xmax - xmin], axis=1)


def test_graph_has_the_original_nodes_and_attributes(setup):
  export_dir = setup['export_dir']
  assert sorted(os.listdir(export_dir)) == ['tflite_graph.pb',
                                            'tflite_graph.pbtxt']
  nodes = {node.name: node for node in
           _graph_def(os.path.join(export_dir, 'tflite_graph.pb')).node}
  assert nodes[INPUT].op == 'Placeholder'
  assert [d.size for d in nodes[INPUT].attr['shape'].shape.dim] == [
      1, SIZE, SIZE, 3]
  assert nodes['anchors'].op == 'Const'
  assert not [n for n in nodes.values() if n.op.startswith('Variable')]
  op = nodes[POSTPROCESS]
  assert op.op == POSTPROCESS
  assert list(op.input) == RAW_OUTPUTS + ['anchors']
  attr = op.attr
  # Flag values and the demo config's NMS settings and box coder scales.
  assert attr['max_detections'].i == 10
  assert attr['max_classes_per_detection'].i == 1
  assert attr['detections_per_class'].i == 100
  assert attr['use_regular_nms'].b is False
  assert attr['num_classes'].i == NUM_CLASSES
  assert attr['nms_score_threshold'].f == pytest.approx(1e-4)
  assert attr['nms_iou_threshold'].f == pytest.approx(0.5)
  assert [attr[k].f for k in ('y_scale', 'x_scale', 'h_scale', 'w_scale')
         ] == [10.0, 10.0, 5.0, 5.0]
  assert attr['_output_quantized'].b is True
  assert attr['_support_output_type_float_in_quantized_op'].b is True
  assert list(attr['_output_types'].list.type) == [types_pb2.DT_FLOAT] * 4
  with open(os.path.join(export_dir, 'tflite_graph.pbtxt')) as f:
    assert 'TFLite_Detection_PostProcess' in f.read()


def test_tflite_detections_match_the_model(setup, float_model):
  ref = setup['reference']
  out = tflite_runs.run_model(float_model, setup['image'])
  boxes = out[POSTPROCESS][0]
  classes, scores = out[POSTPROCESS + ':1'][0], out[POSTPROCESS + ':2'][0]
  assert boxes.shape == (10, 4)
  # The score threshold (1e-4) keeps every box: 10 detections.
  assert out[POSTPROCESS + ':3'][0] == 10
  assert np.all(np.diff(scores) <= 0)
  raw_boxes = ref['raw_detection_boxes'][0]
  raw_scores = ref['raw_detection_scores'][0][:, 1:]  # without background
  # The best detection is the best anchor score of the model, never
  # suppressed; the model clips it to the image, the op does not.
  best = np.unravel_index(np.argmax(raw_scores), raw_scores.shape)
  assert scores[0] == pytest.approx(raw_scores[best], abs=1e-4)
  assert scores[0] == pytest.approx(ref['detection_scores'][0, 0], abs=1e-4)
  assert classes[0] == best[1] == ref['detection_classes'][0, 0]
  np.testing.assert_allclose(boxes[0], raw_boxes[best[0]], atol=1e-4)
  np.testing.assert_allclose(np.clip(boxes[0], 0.0, 1.0),
                             ref['detection_boxes'][0, 0], atol=1e-4)
  # Every detection is some anchor's decoded box with that anchor's score
  # for the reported (0-based) class.
  for box, label, score in zip(boxes, classes.astype(int), scores):
    anchor = np.argmin(np.abs(raw_boxes - box).max(axis=1))
    np.testing.assert_allclose(raw_boxes[anchor], box, atol=1e-4)
    assert raw_scores[anchor, label] == pytest.approx(score, abs=1e-4)
    # Fast NMS with max_classes_per_detection=1 reports the anchor's best.
    assert label == np.argmax(raw_scores[anchor])


def test_cli_raw_outputs_variant_converts(setup):
  root = setup['root']
  out_dir = str(root / 'raw')
  result = _cli('--pipeline_config_path=' + setup['config_path'],
                '--trained_checkpoint_prefix=' + setup['prefix'],
                '--output_directory=' + out_dir,
                '--add_postprocessing_op=false', '--convert')
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(os.listdir(out_dir)) == ['detect.tflite', 'tflite_graph.pb',
                                         'tflite_graph.pbtxt']
  graph_path = os.path.join(out_dir, 'tflite_graph.pb')
  nodes = {node.name: node for node in _graph_def(graph_path).node}
  assert POSTPROCESS not in nodes
  ref = setup['reference']
  # The anchors constant is the model's anchors in center-size form.
  anchors = tf.make_ndarray(nodes['anchors'].attr['value'].tensor)
  np.testing.assert_allclose(anchors, _center_size(ref['anchors']),
                             atol=1e-6)
  # --convert wrote the float conversion of the graph.
  with open(os.path.join(out_dir, 'detect.tflite'), 'rb') as f:
    out = tflite_runs.run_model(f.read(), setup['image'])
  np.testing.assert_allclose(out['raw_outputs/box_encodings'],
                             ref['box_encodings'], atol=1e-4)
  # Scores after the config's SIGMOID, background column included.
  sigmoid = 1.0 / (1.0 + np.exp(-ref['class_predictions_with_background']))
  np.testing.assert_allclose(out['raw_outputs/class_predictions'], sigmoid,
                             atol=1e-4)


def test_post_training_quantization_keeps_the_top_detection(setup,
                                                            float_model):
  """Full-integer model calibrated on the eval records vs the float one."""
  config = setup['config']
  path = tflite_conversion.write_tflite(
      setup['export_dir'], config, post_training_quantize=True,
      representative_examples=8, tflite_name='ptq.tflite')
  with open(path, 'rb') as f:
    model = f.read()
  interpreter = tf.lite.Interpreter(model_content=model)
  assert interpreter.get_input_details()[0]['dtype'] == np.uint8
  assert tflite_runs.conv_dtypes(interpreter) == {'weights': {np.int8},
                                                  'outputs': {np.int8}}
  tensors = {t['index']: t for t in interpreter.get_tensor_details()}
  ops = interpreter._get_ops_details()  # pylint: disable=protected-access
  # Only the custom op's inputs are dequantized to float.
  assert {op['op_name'] for op in ops
          if tensors[op['outputs'][0]]['dtype'] == np.float32} == {
              'DEQUANTIZE', POSTPROCESS}
  # A real eval image, as calibrated; the float model is the reference.
  image = tflite_conversion._read_images(  # pylint: disable=protected-access
      config, 1)[0]
  quantized = tflite_runs.detections(tflite_runs.run_model(model, image))
  reference = tflite_runs.detections(tflite_runs.run_model(float_model,
                                                         image))
  assert len(quantized[0]) == 10
  assert not tflite_runs.unmatched(quantized, reference, top=5, atol=0.03)


def test_post_training_quantization_needs_a_float_model_and_eval_data():
  pipeline_config = _pipeline_config()
  pipeline_config.graph_rewriter.quantization.delay = 2
  with pytest.raises(errors.UserInputError, match='for float models'):
    tflite_conversion.check_options(pipeline_config, True, 10)
  pipeline_config.ClearField('graph_rewriter')
  tflite_conversion.check_options(pipeline_config, False, 0)
  with pytest.raises(errors.UserInputError, match='must be positive'):
    tflite_conversion.check_options(pipeline_config, True, 0)
  del pipeline_config.eval_input_reader[:]
  with pytest.raises(errors.UserInputError, match='eval_input_reader'):
    tflite_conversion.check_options(pipeline_config, True, 10)


def _cli(*args):
  """The command run in-process, as `python -m` runs it."""
  return command_modules.run_command('export_tflite_ssd_graph', args)


def test_cli_help_lists_the_original_flags_and_errors_are_one_line(tmp_path):
  result = _cli('--help')
  assert result.returncode == 0
  for flag in ('output_directory', 'pipeline_config_path',
               'trained_checkpoint_prefix', 'max_detections',
               'max_classes_per_detection', 'detections_per_class',
               'add_postprocessing_op', 'use_regular_nms', 'config_override',
               'convert', 'post_training_quantize', 'representative_examples'):
    # absl lists booleans as --[no]flag.
    assert flag + ':' in result.stdout
  result = _cli('--output_directory=' + str(tmp_path))
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      'error: missing required flag(s): --pipeline_config_path, '
      '--trained_checkpoint_prefix']


def _export(pipeline_config, tmp_path, prefix='unused'):
  export_tflite_ssd_graph_lib.export_tflite_graph(
      pipeline_config, prefix, str(tmp_path), add_postprocessing_op=True,
      max_detections=10, max_classes_per_detection=1)


def test_non_ssd_model_is_rejected(tmp_path):
  pipeline_config = _pipeline_config()
  pipeline_config.model.faster_rcnn.num_classes = 3
  with pytest.raises(ValueError, match='Only ssd models.*faster_rcnn'):
    _export(pipeline_config, tmp_path)


def test_a_resizer_of_no_fixed_size_is_rejected(tmp_path):
  pipeline_config = _pipeline_config()
  resizer = pipeline_config.model.ssd.image_resizer
  resizer.keep_aspect_ratio_resizer.min_dimension = 64
  with pytest.raises(ValueError, match='keep_aspect_ratio_resizer'):
    _export(pipeline_config, tmp_path)


def test_a_resizer_padding_to_a_square_gives_that_input():
  # EfficientDet's resizer (exported in tests/test_efficientdet_end_to_end.py).
  pipeline_config = _pipeline_config()
  resizer = pipeline_config.model.ssd.image_resizer.keep_aspect_ratio_resizer
  resizer.min_dimension, resizer.max_dimension = 48, 80
  resizer.pad_to_max_dimension = True
  assert export_tflite_ssd_graph_lib.check_config(pipeline_config) == [
      1, 80, 80, 3]


def test_other_box_coder_is_rejected(tmp_path):
  pipeline_config = _pipeline_config()
  pipeline_config.model.ssd.box_coder.square_box_coder.y_scale = 10.0
  with pytest.raises(ValueError, match='square_box_coder'):
    _export(pipeline_config, tmp_path)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
  with pytest.raises(ValueError, match='checkpoint not found'):
    _export(_pipeline_config(), tmp_path,
            prefix=str(tmp_path / 'model.ckpt-1'))


def test_a_calibration_label_map_out_of_reach_is_one_line(tmp_path, capsys):
  # As a new user would: --post_training_quantize with an eval label map
  # on a path TensorFlow cannot read (gs:// offline, s3:// in TF 2.15).
  export_command = command_modules.import_command(
      'export_tflite_ssd_graph')
  pipeline_config = _pipeline_config()
  label_map = 'nosuchscheme://bucket/label_map.pbtxt'
  pipeline_config.eval_input_reader[0].label_map_path = label_map
  config_util.save_pipeline_config(pipeline_config, str(tmp_path))
  with pytest.raises(SystemExit) as raised:
    export_command.main([
        '--pipeline_config_path=%s' % (tmp_path / 'pipeline.config'),
        '--trained_checkpoint_prefix=%s' % (tmp_path / 'model.ckpt-1'),
        '--output_directory=%s' % (tmp_path / 'out'), '--config_override=',
        '--post_training_quantize', '--noconvert',
        '--representative_examples=10'])
  assert raised.value.code == 1
  err = capsys.readouterr().err
  assert err.count('\n') == 1, err
  assert err.startswith(
      'error: --post_training_quantize: eval_input_reader[0].label_map_path: '
      '%s: cannot read the label map: ' % label_map)
  assert not (tmp_path / 'out').exists()  # Refused before the export.


def test_a_calibration_input_that_matches_nothing_names_the_flag(tmp_path):
  pipeline_config = _pipeline_config(tmp_path / 'data')
  reader = pipeline_config.eval_input_reader[0].tf_record_input_reader
  reader.input_path[:] = [str(tmp_path / 'nowhere-*.record')]
  with pytest.raises(errors.UserInputError) as raised:
    tflite_conversion.representative_dataset(pipeline_config, 2)
  assert str(raised.value) == (
      "--post_training_quantize: eval_input_reader[0]: tf_record_input_reader"
      ".input_path pattern %r matches no files." % str(
          tmp_path / 'nowhere-*.record'))
