"""Quantization-aware training end to end: model_main, exports, uint8 TFLite.

One model_main run of the light tiny SSD (MobileNet v1 x0.25, 64x64, no
moving averages: tiny_ssd.LIGHT_OVERRIDES, whose training graph builds in
about 2/3 of the demo model's time; the MobileNet v2 rewrite, residual adds
included, is checked in tests/builders/test_graph_rewriter_builder.py) with
`graph_rewriter { quantization { delay: 2 } }`, shared by the tests: it
trains 4 steps (FakeQuant active from step 2), evaluates and writes its
Servo export; then export_inference_graph and export_tflite_ssd_graph
(+ conversion to a uint8 .tflite) run on the checkpoint. Training starts
from a checkpoint of variance-preserving random weights (fine_tune_checkpoint)
so that the evaluation graph's scores and boxes are spread out; with the
config's small initializer every detection would tie at score 0.5.

The uint8 model is compared with the fake-quantized frozen graph run in
TensorFlow on the same eval images, per anchor: on average over all anchors,
and on the top anchors (best class, score, box). Few-step ranges clip the
class logits, so several anchors share the top score and the order of those
tied detections is arbitrary: the anchors, not the ranked detections, are
compared.
"""
import glob
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from od_estimator.export import exporter
from od_estimator.export import export_tflite_ssd_graph_lib
from od_estimator.export import tflite_conversion
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from tests import command_modules
from tests import event_tags
from tests import fast_graphs
from tests import tflite_runs
from tests import tiny_ssd

STEPS = 4
QUANTIZATION = 'graph_rewriter { quantization { delay: 2 } }\n'
# A batch-norm'd convolution of the backbone and a box predictor layer.
LAYERS = ('FeatureExtractor/MobilenetV1/MobilenetV1/Conv2d_0',
          'BoxPredictor_0/ClassPredictor')
# uint8 TFLite vs the fake-quantized graph: each integer kernel rounds
# within an output step of the graph's, and the differences accumulate over
# the layers (measured on MobileNet v2's ~50, 6 images: per-anchor mean
# 0.008 on scores and 0.02 of the box codes' range; on the top anchors,
# scores within 0.016 and boxes within 0.04 of the anchor's size).
SCORE_STEP = 1.0 / 256  # of the uint8 sigmoid output
SCORE_TOLERANCE = 0.05
BOX_TOLERANCE = 0.08
MEAN_DIFF = 0.02  # scores
MEAN_BOX_DIFF = 0.05  # box codes, as a fraction of their range


def _write_spread_checkpoint(pipeline_config, prefix):
  """Saves the model's freshly initialized weights, redrawn spread out."""
  # Built with identity hashing, as model_lib builds its graphs.
  with fast_graphs.new_graph() as graph:
    model = model_builder.build(pipeline_config.model, is_training=False)
    size = tflite_conversion.input_shape(pipeline_config)[1]
    model.predict(tf.zeros([1, size, size, 3]), None)
    spread = tflite_runs.spread_out_weights()
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(spread)
      tf.compat.v1.train.Saver().save(sess, prefix)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """model_main's run; returns paths and the config as run."""
  root = tmp_path_factory.mktemp('quantized')
  path = tiny_ssd.write_config(root, root / 'data', extra=QUANTIZATION)
  configs = config_util.merge_external_params_with_configs(
      config_util.get_configs_from_pipeline_file(path),
      config_util.parse_hparams_overrides(tiny_ssd.LIGHT_OVERRIDES))
  pipeline_config = config_util.create_pipeline_proto_from_configs(configs)
  start = str(root / 'start' / 'model.ckpt')
  _write_spread_checkpoint(pipeline_config, start)
  train_config = pipeline_config.train_config
  train_config.fine_tune_checkpoint = start
  train_config.fine_tune_checkpoint_type = 'detection'
  train_config.load_all_detection_checkpoint_vars = True
  config_util.save_pipeline_config(pipeline_config, str(root))
  model_dir = str(root / 'model')
  # In this process (tests/command_modules.py): no process property is
  # checked.
  result = command_modules.run_command('model_main', [
      '--pipeline_config_path=%s' % path, '--model_dir=%s' % model_dir,
      '--num_train_steps=%d' % STEPS, '--save_checkpoints_steps=%d' % STEPS,
      # The evaluation (its metrics are only looked up) on 1 of the 8
      # validation images.
      '--sample_1_of_n_eval_examples=8', '--random_seed=1'])
  assert result.returncode == 0, result.stderr[-3000:]
  checkpoint = os.path.join(model_dir, 'model.ckpt-%d' % STEPS)
  return {'root': root, 'model_dir': model_dir, 'checkpoint': checkpoint,
          'config': config_util.read_pipeline_config(
              os.path.join(model_dir, 'pipeline.config'))}


@pytest.fixture(scope='module')
def exported(trained):
  """The SavedModel of export_inference_graph and the uint8 .tflite."""
  root, config = trained['root'], trained['config']
  export_dir = str(root / 'export')
  exporter.export_inference_graph('image_tensor', config,
                                  trained['checkpoint'], export_dir)
  tflite_dir = str(root / 'tflite')
  export_tflite_ssd_graph_lib.export_tflite_graph(
      config, trained['checkpoint'], tflite_dir, add_postprocessing_op=True,
      max_detections=10, max_classes_per_detection=1)
  tflite_path = tflite_conversion.write_tflite(tflite_dir, config)
  return {'saved_model': os.path.join(export_dir, 'saved_model'),
          'frozen': os.path.join(export_dir, 'frozen_inference_graph.pb'),
          'tflite_graph': os.path.join(tflite_dir, 'tflite_graph.pb'),
          'tflite': tflite_path}


def _node_types(path):
  graph_def = tf.compat.v1.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  return [node.op for node in graph_def.node]


def test_training_learns_ranges_under_the_original_names(trained):
  reader = tf.train.load_checkpoint(trained['checkpoint'])
  for layer in LAYERS:
    for quant in ('weights_quant', 'act_quant'):
      low = reader.get_tensor('%s/%s/min' % (layer, quant))
      high = reader.get_tensor('%s/%s/max' % (layer, quant))
      assert low < high, (layer, quant, low, high)
  # Activation ranges moved from their initial [0, 6] / [-6, 6].
  assert reader.get_tensor(LAYERS[1] + '/act_quant/max') != 6.0
  eval_tags = event_tags.scalar_tags(
      os.path.join(trained['model_dir'], 'eval_0'))
  assert 'DetectionBoxes_Precision/mAP' in eval_tags
  assert glob.glob(os.path.join(trained['model_dir'], 'export', 'Servo', '*',
                                'saved_model.pb'))


def _variable_names(checkpoint_prefix):
  return {name for name, _ in tf.train.list_variables(checkpoint_prefix)}


def test_eval_rewrite_only_reads_ranges_under_the_original_names(trained):
  """model_main's Servo export is the eval-mode graph, rewritten for
  evaluation (graph_rewriter_builder, is_training=False) and saved with
  its variables: the float model's (those of the start checkpoint, built
  is_training=False) plus the rewrite's."""
  (servo,) = glob.glob(os.path.join(trained['model_dir'], 'export', 'Servo',
                                    '*'))
  added = (_variable_names(os.path.join(servo, 'variables', 'variables')) -
           _variable_names(str(trained['root'] / 'start' / 'model.ckpt')) -
           {'global_step'})
  # The backbone's ops sit in a doubled MobilenetV1 name scope, hence the
  # original's names; the SSD extra layers are one level up.
  prefix = 'FeatureExtractor/MobilenetV1/'
  for name in (prefix + 'MobilenetV1/Conv2d_0/weights_quant/min',
               prefix + 'MobilenetV1/Conv2d_0/act_quant/max',
               prefix + 'MobilenetV1/Conv2d_1_depthwise/weights_quant/max',
               prefix + 'MobilenetV1/Conv2d_13_pointwise/act_quant/min',
               'BoxPredictor_5/ClassPredictor/act_quant/max'):
    assert name in added, name
  extra = re.compile(prefix + r'Conv2d_13_pointwise_2_Conv2d_2_3x3_s2_\d+/'
                     r'(weights|act)_quant/(min|max)$')
  assert len([name for name in added if extra.match(name)]) == 4
  # Evaluation only reads ranges: no step, no moving-average variables.
  assert all(name.endswith(('/min', '/max')) for name in added)
  saved_model = saved_model_pb2.SavedModel()
  with open(os.path.join(servo, 'saved_model.pb'), 'rb') as f:
    saved_model.ParseFromString(f.read())
  (meta_graph,) = saved_model.meta_graphs
  assert not [node.name for node in meta_graph.graph_def.node
              if 'AssignMinEma' in node.name or 'AssignMaxLast' in node.name]


def test_exported_graphs_hold_the_fake_quantization(exported):
  assert tf.saved_model.contains_saved_model(exported['saved_model'])
  for path in (exported['frozen'], exported['tflite_graph']):
    types = _node_types(path)
    assert types.count('FakeQuantWithMinMaxVars') > 50, path
    # Batch norms are folded into the convolutions.
    assert not [t for t in types if t.startswith('FusedBatchNorm')], path


def _eval_images(trained, count):
  """The first uint8 [1, h, w, 3] images of the eval records."""
  reader = trained['config'].eval_input_reader[0].tf_record_input_reader
  files = sorted(glob.glob(reader.input_path[0]))
  images = []
  for record in tf.data.TFRecordDataset(files).take(count):
    example = tf.train.Example.FromString(record.numpy())
    encoded = example.features.feature['image/encoded'].bytes_list.value[0]
    images.append(tf.io.decode_image(encoded).numpy()[None])
  return images


def _fake_quant_raw_outputs(graph_path, normalized_images):
  """The frozen tflite graph's raw outputs run in TF (custom op dropped),
  one [boxes, scores] per image; the graph is imported once."""
  graph_def = tf.compat.v1.GraphDef()
  with open(graph_path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  kept = [n for n in graph_def.node if n.op != tflite_runs.POSTPROCESS]
  del graph_def.node[:]
  graph_def.node.extend(kept)
  with tf.Graph().as_default() as graph:
    tf.compat.v1.import_graph_def(graph_def, name='')
    with tf.compat.v1.Session(graph=graph) as sess:
      return [sess.run(
          [name + ':0' for name in tflite_conversion.RAW_OUTPUTS],
          {tflite_runs.INPUT + ':0': normalized})
              for normalized in normalized_images]


def _uint8_raw_outputs(model, image):
  """The uint8 raw-output model's outputs on uint8 pixels, dequantized."""
  interpreter = tf.lite.Interpreter(model_content=model)
  interpreter.allocate_tensors()
  interpreter.set_tensor(interpreter.get_input_details()[0]['index'], image)
  interpreter.invoke()
  outputs = {}
  for detail in interpreter.get_output_details():
    scale, zero_point = detail['quantization']
    value = interpreter.get_tensor(detail['index']).astype(np.float32)
    outputs[detail['name']] = (value - zero_point) * scale if scale else value
  return [outputs[name] for name in tflite_conversion.RAW_OUTPUTS]


def test_uint8_tflite_agrees_with_the_fake_quantized_graph(trained,
                                                           exported):
  with open(exported['tflite'], 'rb') as f:
    model = f.read()
  interpreter = tf.lite.Interpreter(model_content=model)
  interpreter.allocate_tensors()
  detail = interpreter.get_input_details()[0]
  assert detail['dtype'] == np.uint8
  assert detail['quantization'] == (1.0 / 128, 128)
  assert tflite_runs.conv_dtypes(interpreter) == {'weights': {np.uint8},
                                                  'outputs': {np.uint8}}
  # The same graph's raw outputs (before the postprocessing op), per anchor.
  raw_model = tflite_conversion.convert(
      exported['tflite_graph'], trained['config'], add_postprocessing_op=False)
  coder = trained['config'].model.ssd.box_coder.faster_rcnn_box_coder
  coder_scales = np.array([coder.y_scale, coder.x_scale, coder.height_scale,
                           coder.width_scale])
  images = _eval_images(trained, 3)
  # The uint8 model's input stats: normalized = (pixel - 128) / 128.
  references = _fake_quant_raw_outputs(
      exported['tflite_graph'],
      [(image.astype(np.float32) - 128) / 128 for image in images])
  for image, (ref_boxes, ref_scores) in zip(images, references):
    boxes, scores = _uint8_raw_outputs(raw_model, image)
    # Rounding drifts over the layers, without a systematic offset.
    assert np.abs(scores - ref_scores).mean() <= MEAN_DIFF
    box_diff = np.abs(boxes - ref_boxes) / np.ptp(ref_boxes)
    assert box_diff.mean() <= MEAN_BOX_DIFF
    # The top anchors: those the graph scores at its best (few-step ranges
    # clip the logits, so the best score is shared by several anchors).
    ref_best = ref_scores[0, :, 1:].max(axis=1)
    top = ref_best >= ref_best.max() - SCORE_STEP
    best = scores[0, :, 1:].max(axis=1)
    assert best[top].min() >= best.max() - SCORE_TOLERANCE
    np.testing.assert_array_equal(np.argmax(scores[0, top, 1:], axis=1),
                                  np.argmax(ref_scores[0, top, 1:], axis=1))
    # Their boxes: codes over the coder's scales are center offsets and log
    # size ratios, fractions of the anchor's size.
    shift = np.abs(boxes[0, top] - ref_boxes[0, top]) / coder_scales
    assert shift.max() <= BOX_TOLERANCE, shift.max()
    # The postprocessing op's best detection is a top anchor's.
    interpreter.set_tensor(detail['index'], image)
    interpreter.invoke()
    _, classes, top_scores = tflite_runs.detections(
        {d['name']: interpreter.get_tensor(d['index'])
         for d in interpreter.get_output_details()})
    assert top_scores[0] == pytest.approx(ref_best.max(), abs=SCORE_TOLERANCE)
    assert classes[0] in np.argmax(ref_scores[0, top, 1:], axis=1)
