"""exporter and the export_inference_graph CLI.

The model is a real SSDMetaArch built by model_builder from a text config,
with the tiny fake feature extractor of tests/fakes.py registered as
'fake_ssd' (MobileNet graphs take ~10 s each to build, too slow to export
three times here). Checkpoints come from freshly initialized graphs; the
reference detections are the model graph run directly on the same images.
The exports are loaded back in a fresh interpreter, as a server would.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.export import exporter
from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util
from tests import fakes
from tests import image_inputs
from tests.command_modules import run_command

INPUT_TYPES = ('image_tensor', 'encoded_image_string_tensor', 'tf_example')
MAX_DETECTIONS = 5
# ssd_anchor_generator, 2 layers, 3 aspect ratios: 3 boxes per cell on the
# fake extractor's 2x2 map, 3 + 1 on its 1x1 map: 2 * 2 * 3 + 1 * 4 = 16.
NUM_ANCHORS = 16
NUM_CLASSES = 3
HYPERPARAMS = """
  activation: RELU_6
  initializer { truncated_normal_initializer { stddev: 0.3 } }
  batch_norm { scale: true center: true decay: 0.97 epsilon: 0.001 }
"""
PIPELINE = """
model { ssd {
  num_classes: %(num_classes)d
  image_resizer { fixed_shape_resizer { height: 64 width: 64 } }
  feature_extractor { type: "fake_ssd" depth_multiplier: 1.0 min_depth: 8
                      num_layers: 2 conv_hyperparams { %(hp)s } }
  box_coder { faster_rcnn_box_coder { y_scale: 10.0 x_scale: 10.0
                                      height_scale: 5.0 width_scale: 5.0 } }
  matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5 } }
  similarity_calculator { iou_similarity {} }
  anchor_generator { ssd_anchor_generator { num_layers: 2 min_scale: 0.2
                     max_scale: 0.95 aspect_ratios: [1.0, 2.0, 0.5] } }
  box_predictor { convolutional_box_predictor { kernel_size: 1
                  box_code_size: 4 conv_hyperparams { %(hp)s } } }
  loss {
    classification_loss { weighted_sigmoid_focal { gamma: 2.0 alpha: 0.25 } }
    localization_loss { weighted_smooth_l1 {} }
    classification_weight: 1.0 localization_weight: 1.0
  }
  post_processing {
    batch_non_max_suppression { score_threshold: 0.0 iou_threshold: 0.6
      max_detections_per_class: %(max)d max_total_detections: %(max)d }
    score_converter: SIGMOID
  }
} }
train_config {
  batch_size: 2
  optimizer { momentum_optimizer { learning_rate {
    constant_learning_rate { learning_rate: 0.01 } } } }
}
eval_config { metrics_set: "coco_detection_metrics" }
"""
REQUIRED_KEYS = {'detection_boxes', 'detection_scores', 'detection_classes',
                 'num_detections'}
# SSD also returns these, so the export serves them.
OPTIONAL_KEYS = {'detection_multiclass_scores', 'raw_detection_boxes',
                 'raw_detection_scores'}
# Every moving average in the module's checkpoint (_write_checkpoint).
EMA_VALUE = 0.25


def _pipeline(num_classes=NUM_CLASSES):
  return text_format.Merge(
      PIPELINE % {'num_classes': num_classes, 'hp': HYPERPARAMS,
                  'max': MAX_DETECTIONS},
      pipeline_pb2.TrainEvalPipelineConfig())


@pytest.fixture(scope='module')
def fake_registry():
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS,
                  'fake_ssd', fakes.FakeSSDFeatureExtractor)
    yield


def _write_checkpoint(directory, pipeline_config, images, ema_value=None):
  """Saves a freshly initialized model; returns (prefix, detections).

  The detections are the model graph's own outputs on `images` with those
  weights (classes 0-based, as postprocess returns them). With ema_value,
  every trainable variable also gets a `<name>/ExponentialMovingAverage`
  entry filled with that value.
  """
  with tf.Graph().as_default():
    model = model_builder.build(pipeline_config.model, is_training=False,
                                add_summaries=False)
    inputs = tf.constant(images, tf.float32)
    preprocessed, true_shapes = model.preprocess(inputs)
    detections = model.postprocess(model.predict(preprocessed, true_shapes),
                                   true_shapes)
    step = tf.compat.v1.train.get_or_create_global_step()
    if ema_value is not None:
      for var in tf.compat.v1.trainable_variables():
        tf.compat.v1.Variable(tf.fill(var.shape, ema_value),
                              name=var.op.name + '/ExponentialMovingAverage')
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(step.assign(7))
      result = sess.run(detections)
      prefix = tf.compat.v1.train.Saver().save(
          sess, os.path.join(str(directory), 'model.ckpt'), global_step=7)
  return prefix, result


@pytest.fixture(scope='module')
def exports(tmp_path_factory, fake_registry):
  """Exports one checkpoint for each input type.

  The checkpoint also holds moving averages (EMA_VALUE): without
  eval_config.use_moving_averages the exports serve the raw weights.
  """
  del fake_registry
  root = tmp_path_factory.mktemp('export')
  pipeline_config = _pipeline()
  prefix, expected = _write_checkpoint(root / 'train', pipeline_config,
                                       image_inputs.images(),
                                       ema_value=EMA_VALUE)
  directories = {}
  for input_type in INPUT_TYPES:
    directories[input_type] = str(root / input_type)
    exporter.export_inference_graph(input_type, pipeline_config, prefix,
                                    directories[input_type])
  return {'dirs': directories, 'expected': expected, 'root': root,
          'prefix': prefix}


# The serving side: TF2 loading of the SavedModel, TF1 import of the frozen
# graph, in an interpreter that never saw our code.
LOADER = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tensorflow as tf
    request = json.load(open(sys.argv[1]))
    images = np.load(request['images'])
    results = {}
    feeds = {
        'image_tensor': images,
        'encoded_image_string_tensor': [bytes.fromhex(s) for s in request['pngs']],
        'tf_example': [bytes.fromhex(s) for s in request['examples']],
    }
    for input_type, directory in request['dirs'].items():
      inputs = tf.constant(feeds[input_type])
      serve = tf.saved_model.load(directory + '/saved_model').signatures[
          'serving_default']
      for key, value in serve(inputs=inputs).items():
        results['%s/saved_model/%s' % (input_type, key)] = value.numpy()
        results['%s/dtype/%s' % (input_type, key)] = np.array(value.dtype.name)
    graph_def = tf.compat.v1.GraphDef()
    with open(request['dirs']['image_tensor'] + '/frozen_inference_graph.pb', 'rb') as f:
      graph_def.ParseFromString(f.read())
    with tf.Graph().as_default() as graph:
      tf.compat.v1.import_graph_def(graph_def, name='')
      with tf.compat.v1.Session(graph=graph) as sess:
        names = ['detection_boxes', 'detection_scores', 'detection_classes',
                 'num_detections']
        values = sess.run([n + ':0' for n in names],
                          feed_dict={'image_tensor:0': images})
    for name, value in zip(names, values):
      results['frozen/' + name] = value
    np.savez(request['out'], **results)
''')


@pytest.fixture(scope='module')
def served(exports):
  """Runs LOADER on the exports; returns its arrays."""
  root = exports['root']
  images = image_inputs.images()
  np.save(str(root / 'images.npy'), images)
  request = {
      'dirs': exports['dirs'], 'images': str(root / 'images.npy'),
      'pngs': [image_inputs.png(image).hex() for image in images],
      'examples': [image_inputs.tf_example(image).hex() for image in images],
      'out': str(root / 'served.npz')}
  with open(str(root / 'request.json'), 'w') as f:
    json.dump(request, f)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  result = subprocess.run(
      [sys.executable, '-c', LOADER, str(root / 'request.json')],
      capture_output=True, text=True, timeout=300, env=env, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return dict(np.load(request['out']))


def _assert_matches_model(outputs, expected):
  """Export outputs == the model graph's, classes shifted to 1-based."""
  np.testing.assert_allclose(outputs['detection_boxes'],
                             expected['detection_boxes'], atol=1e-4)
  np.testing.assert_allclose(outputs['detection_scores'],
                             expected['detection_scores'], atol=1e-4)
  np.testing.assert_allclose(outputs['detection_classes'],
                             expected['detection_classes'] + 1.0, atol=1e-4)
  np.testing.assert_allclose(outputs['num_detections'],
                             expected['num_detections'], atol=1e-4)


@pytest.mark.parametrize('input_type', INPUT_TYPES)
def test_saved_model_serves_the_models_detections(served, exports,
                                                  input_type):
  prefix = input_type + '/saved_model/'
  outputs = {k[len(prefix):]: v for k, v in served.items()
             if k.startswith(prefix)}
  assert set(outputs) == REQUIRED_KEYS | OPTIONAL_KEYS
  assert outputs['detection_boxes'].shape == (2, MAX_DETECTIONS, 4)
  assert outputs['detection_scores'].shape == (2, MAX_DETECTIONS)
  assert outputs['detection_classes'].shape == (2, MAX_DETECTIONS)
  assert outputs['num_detections'].shape == (2,)
  assert outputs['raw_detection_boxes'].shape == (2, NUM_ANCHORS, 4)
  assert outputs['raw_detection_scores'].shape == (2, NUM_ANCHORS,
                                                   NUM_CLASSES + 1)
  for key in outputs:
    assert str(served['%s/dtype/%s' % (input_type, key)]) == 'float32', key
  # Score threshold 0: every slot is a detection with a 1-based label id.
  np.testing.assert_array_equal(outputs['num_detections'], [5.0, 5.0])
  assert set(np.unique(outputs['detection_classes'])) <= {1.0, 2.0, 3.0}
  _assert_matches_model(outputs, exports['expected'])


def test_frozen_graph_has_the_original_tensor_names(served, exports):
  outputs = {k[len('frozen/'):]: v for k, v in served.items()
             if k.startswith('frozen/')}
  _assert_matches_model(outputs, exports['expected'])


def test_saved_model_signature_and_export_layout(exports):
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  directory = exports['dirs']['encoded_image_string_tensor']
  assert {'frozen_inference_graph.pb', 'saved_model', 'pipeline.config',
          'model.ckpt.index', 'model.ckpt.meta'} <= set(os.listdir(directory))
  saved_model = saved_model_pb2.SavedModel()
  with open(os.path.join(directory, 'saved_model', 'saved_model.pb'),
            'rb') as f:
    saved_model.ParseFromString(f.read())
  meta_graph, = saved_model.meta_graphs
  assert list(meta_graph.meta_info_def.tags) == ['serve']
  signature = meta_graph.signature_def['serving_default']
  assert signature.method_name == 'tensorflow/serving/predict'
  assert list(signature.inputs) == ['inputs']
  assert signature.inputs['inputs'].name == 'encoded_image_string_tensor:0'
  assert signature.inputs['inputs'].dtype == tf.string.as_datatype_enum
  assert set(signature.outputs) == REQUIRED_KEYS | OPTIONAL_KEYS
  for key, info in signature.outputs.items():
    assert info.name == key + ':0'
  saved = config_util.read_pipeline_config(
      os.path.join(directory, 'pipeline.config'))
  assert saved.model == _pipeline().model


def test_reexport_replaces_and_keeps_extras(exports, tmp_path):
  """Re-export over an export (overwrite), extra nodes, a fixed shape."""
  directory = str(tmp_path / 'export')
  shutil.copytree(exports['dirs']['image_tensor'], directory)
  with tf.Graph().as_default():
    # A directory stands for its latest checkpoint, model.ckpt-7.
    exporter.export_inference_graph(
        'image_tensor', _pipeline(), str(exports['root'] / 'train'),
        directory,
        input_shape=[1, 48, None, 3],
        additional_output_tensor_names=['global_step:0'],
        write_inference_graph=True, overwrite=True)
  assert os.path.exists(os.path.join(directory, 'inference_graph.pbtxt'))
  graph_def = tf.compat.v1.GraphDef()
  with open(os.path.join(directory, 'frozen_inference_graph.pb'), 'rb') as f:
    graph_def.ParseFromString(f.read())
  nodes = {node.name: node for node in graph_def.node}
  shape = nodes['image_tensor'].attr['shape'].shape
  assert [d.size for d in shape.dim] == [1, 48, -1, 3]
  assert nodes['global_step'].op == 'Const'
  # Frozen: no variables left.
  assert not [n for n in graph_def.node
              if n.op in ('VarHandleOp', 'VariableV2')]
  reader = tf.compat.v1.train.NewCheckpointReader(
      os.path.join(directory, 'model.ckpt'))
  assert reader.get_tensor('global_step') == 7


def _exported_values(directory):
  reader = tf.compat.v1.train.NewCheckpointReader(
      os.path.join(directory, 'model.ckpt'))
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def test_moving_averages_are_exported_when_evaluation_uses_them(
    exports, tmp_path):
  pipeline_config = _pipeline()
  raw = tf.compat.v1.train.NewCheckpointReader(exports['prefix'])
  weights = 'BoxPredictor_0/ClassPredictor/weights'
  pipeline_config.eval_config.use_moving_averages = True
  with tf.Graph().as_default():
    exporter.export_inference_graph('image_tensor', pipeline_config,
                                    exports['prefix'], str(tmp_path / 'ema'))
  ema = _exported_values(str(tmp_path / 'ema'))
  assert not [name for name in ema if 'ExponentialMovingAverage' in name]
  np.testing.assert_array_equal(ema[weights],
                                np.full(ema[weights].shape, EMA_VALUE))
  # Not trainable, so not averaged: the checkpoint's own value.
  assert ema['global_step'] == 7
  # The averages are baked in: the saved config must not ask for them again.
  saved = config_util.read_pipeline_config(
      str(tmp_path / 'ema' / 'pipeline.config'))
  assert not saved.eval_config.use_moving_averages

  # Raw weights otherwise, though training kept averages (the optimizer's
  # use_moving_average defaults to true), as Estimator.predict uses them:
  # the module's exports, of _pipeline() (use_moving_averages false).
  assert not _pipeline().eval_config.use_moving_averages
  raw_export = _exported_values(exports['dirs']['image_tensor'])
  assert not [name for name in raw_export
              if 'ExponentialMovingAverage' in name]
  np.testing.assert_array_equal(raw_export[weights], raw.get_tensor(weights))
  assert not np.all(raw.get_tensor(weights) == EMA_VALUE)


def test_bad_arguments_raise_clear_errors(exports, tmp_path):
  directory = str(exports['root'] / 'train')
  with pytest.raises(ValueError, match='checkpoint not found: .*missing'):
    exporter.export_inference_graph(
        'image_tensor', _pipeline(), str(tmp_path / 'missing'),
        str(tmp_path / 'out'))
  with pytest.raises(ValueError, match='Unknown input type'):
    exporter.export_inference_graph('jpeg', _pipeline(), directory,
                                    str(tmp_path / 'out'))
  with pytest.raises(ValueError, match=r'input_shape must be \[batch'):
    exporter.export_inference_graph('image_tensor', _pipeline(), directory,
                                    str(tmp_path / 'out'),
                                    input_shape=[48, 40, 3])
  # 5 classes: the class predictor's shapes differ from the checkpoint's.
  with pytest.raises(ValueError, match='ClassPredictor/weights .*graph'):
    exporter.export_inference_graph('image_tensor', _pipeline(5), directory,
                                    str(tmp_path / 'out'))


def test_exporter_and_estimator_serve_one_list_of_outputs():
  """Every optional output the model returns is served, in one order."""
  fields = standard_fields.DetectionResultFields
  with tf.Graph().as_default():
    detections = {
        fields.detection_boxes: tf.zeros([1, 2, 4]),
        fields.detection_scores: tf.zeros([1, 2]),
        fields.detection_classes: tf.zeros([1, 2]),
        fields.num_detections: tf.zeros([1]),
        fields.detection_anchor_indices: tf.zeros([1, 2], tf.int32),
    }
    for key in standard_fields.OPTIONAL_EXPORTED_OUTPUTS:
      detections[key] = tf.zeros([1, 2, 3])
    expected = [fields.detection_boxes, fields.detection_scores,
                fields.detection_classes, fields.num_detections] + list(
                    standard_fields.OPTIONAL_EXPORTED_OUTPUTS)
    estimator_outputs = model_lib.output_dict_for_export(detections)
    graph_outputs = exporter.add_output_tensor_nodes(detections, None)
  assert list(estimator_outputs) == expected
  assert list(graph_outputs) == expected
  assert graph_outputs[fields.detection_features].name == (
      'detection_features:0')


def test_parse_side_inputs():
  shapes, names, types = exporter.parse_side_inputs('1,-1/3', 'a,b',
                                                    'float,string')
  assert shapes == [[1, None], [3]]
  assert names == ['a', 'b']
  assert types == [tf.float32, tf.string]
  # exporter_main_v2's spelling, the original's TF2 one.
  assert exporter.parse_side_inputs('1', 'a', 'tf.int32')[2] == [tf.int32]
  with pytest.raises(ValueError, match='side_input_names'):
    exporter.parse_side_inputs('1', None, 'int')
  with pytest.raises(ValueError, match='side_input_types: unknown type'):
    exporter.parse_side_inputs('1', 'a', 'integer')


def _cli(*args):
  return run_command('export_inference_graph', args)


def test_cli_help_lists_the_original_flags():
  result = _cli('--help')
  assert result.returncode == 0
  for flag in ('input_type', 'input_shape', 'pipeline_config_path',
               'trained_checkpoint_prefix', 'output_directory',
               'config_override', 'write_inference_graph',
               'additional_output_tensor_names', 'use_side_inputs',
               'side_input_shapes', 'side_input_names', 'side_input_types'):
    assert '--' + flag in result.stdout or '--[no]' + flag in result.stdout
  # How a Context R-CNN is exported, as the original documents it.
  help_text = ' '.join(result.stdout.split())
  for text in ('--side_input_shapes=1,2000,2057/1',
               '--side_input_names=context_features,valid_context_size',
               '--side_input_types=float,int',
               'Context R-CNN: context_features,valid_context_size.',
               'Context R-CNN: float,int.'):
    assert text in help_text, text
  # Ours: replacing an export is asked for.
  assert '--[no]overwrite: Replace an export already in' in result.stdout


def test_cli_missing_checkpoint_is_a_one_line_error(tmp_path):
  config = tmp_path / 'pipeline.config'
  config.write_text(PIPELINE % {'num_classes': 3, 'hp': HYPERPARAMS,
                                'max': MAX_DETECTIONS})
  result = _cli('--pipeline_config_path=%s' % config,
                '--trained_checkpoint_prefix=%s' % (tmp_path / 'model.ckpt-9'),
                '--output_directory=%s' % (tmp_path / 'out'))
  assert result.returncode == 1
  assert 'Traceback' not in result.stderr
  errors = [line for line in result.stderr.splitlines()
            if line.startswith('error:')]
  assert errors == ['error: checkpoint not found: %s (pass the prefix of the '
                    '.index/.data files, e.g. path/model.ckpt-50000).' %
                    (tmp_path / 'model.ckpt-9')]
  assert not os.path.exists(str(tmp_path / 'out'))
