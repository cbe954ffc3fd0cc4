"""`od-estimator inspect_checkpoint` on TF2 and TF1 checkpoints.

The TF2 checkpoint is laid out as the original's TF2 loop writes one for
ssd_mobilenet_v2_320x320 with moving averages (tests/tf2_checkpoints.py),
less the first conv's kernel and with the first class head of another
shape; one run with that config builds the model once for the module.
"""
import contextlib
import io
import re

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from tests import tf2_checkpoints
from tests import upstream_folder

MOBILENET = 'ssd_mobilenet_v2_320x320_coco17_tpu-8'
# The first conv's kernel, its slots included.
FIRST_CONV = ('model/_feature_extractor/classification_backbone/'
              'layer_with_weights-0/kernel/')
CLASS_HEAD = ('model/_box_predictor/_prediction_heads/'
              'class_predictions_with_background/0/_class_predictor_layers/'
              '0/kernel')


def _changed(lines):
  kept = []
  for fact in lines:
    if fact.key.startswith(FIRST_CONV):
      continue
    if fact.key == CLASS_HEAD + '/.ATTRIBUTES/VARIABLE_VALUE':
      fact = fact._replace(shape=[1, 1, 576, 6])
    kept.append(fact)
  return kept


def _run(capsys, argv):
  status = cli.main(['inspect_checkpoint'] + argv)
  out, err = capsys.readouterr()
  return status, out.splitlines(), err


@pytest.fixture(scope='module')
def tf2_checkpoint(tmp_path_factory):
  lines = _changed(tf2_checkpoints.facts(MOBILENET + '.use_moving_average'))
  folder = tmp_path_factory.mktemp('tf2')
  return tf2_checkpoints.write(str(folder / 'ckpt-1'), lines,
                               lambda fact: np.zeros(fact.shape))


@pytest.fixture(scope='module')
def tf2_report(tf2_checkpoint):
  # Module scope: no capsys; the model is built once for the module.
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    status = cli.main([
        'inspect_checkpoint', tf2_checkpoint, '--pipeline_config_path=' +
        upstream_folder.config_path(MOBILENET, tf2=True)])
  return status, out.getvalue().splitlines()


def _line(lines, start):
  found = [line for line in lines if line.startswith(start)]
  assert len(found) == 1, (start, found)
  return found[0]


def test_tf2_report_lists_every_value_and_what_it_feeds(tf2_checkpoint,
                                                         tf2_report):
  status, lines = tf2_report
  assert status == 0
  assert lines[0] == ('%s: object-based (TF2) checkpoint, 734 values'
                      % tf2_checkpoint)
  backbone = 'model/_feature_extractor/classification_backbone/'
  assert _line(lines, backbone + 'layer_with_weights-1/gamma  ') == (
      backbone + 'layer_with_weights-1/gamma  bn_Conv1/gamma  [32]  float32'
      '  -> bn_Conv1/gamma (classification, detection, full)')
  feature_map = ('model/_feature_extractor/feature_map_generator/'
                 'convolutions/2/0/kernel  ')
  assert _line(lines, feature_map).endswith(
      '[1,1,1280,256]  float32  -> ssd_mobile_net_v2_keras_feature_extractor/'
      'FeatureMaps/layer_19_1_Conv2d_2_1x1_256_conv/kernel (detection, full)')
  assert _line(lines, CLASS_HEAD + '  ') == (
      CLASS_HEAD + '  BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/'
      'kernel  [1,1,576,6]  float32  -> nothing: BoxPredictor/'
      'ConvolutionalClassHead_0/ClassPredictor/kernel is [1,1,576,273] in '
      'this model (skipped)')
  assert _line(lines, CLASS_HEAD + '/.OPTIMIZER_SLOT/optimizer/average') == (
      CLASS_HEAD + '/.OPTIMIZER_SLOT/optimizer/average  BoxPredictor/'
      'ConvolutionalClassHead_0/ClassPredictor/kernel/average  [1,1,576,273]'
      '  float32  moving average of ' + CLASS_HEAD)
  assert _line(lines, 'step  ') == (
      'step  global_step  []  int64  training state (never restored by '
      'fine-tuning)')
  assert lines[-3:] == [
      'Variables of this model no value feeds (2):',
      '  BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/kernel',
      '  Conv1/kernel']


def test_tf2_report_without_a_config(capsys, tf2_checkpoint):
  status, lines, _ = _run(capsys, [tf2_checkpoint])
  assert status == 0
  assert len(lines) == 735
  assert _line(lines, 'model/_box_predictor/_prediction_heads/box_encodings/'
               '0/_box_encoder_layers/0/bias  ') == (
                   'model/_box_predictor/_prediction_heads/box_encodings/0/'
                   '_box_encoder_layers/0/bias  BoxPredictor/'
                   'ConvolutionalBoxHead_0/BoxEncodingPredictor/bias  [12]  '
                   'float32')
  assert _line(lines, CLASS_HEAD + '/.OPTIMIZER_SLOT/optimizer/'
               'ema_base_optimizer/momentum').endswith(
                   "float32  optimizer slot 'momentum' of " + CLASS_HEAD)


def test_tf1_report(capsys, tmp_path):
  graph = tf.Graph()
  with graph.as_default():
    weights = tf.compat.v1.get_variable('Conv/weights', [3, 3, 3, 8])
    tf.compat.v1.train.get_or_create_global_step()
    train = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(
        tf.reduce_sum(weights))
    with tf.control_dependencies([train]):
      tf.train.ExponentialMovingAverage(0.9).apply([weights])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      prefix = saver.save(sess, str(tmp_path / 'model.ckpt'))
  status, lines, _ = _run(capsys, [str(tmp_path)])
  assert status == 0
  assert lines == [
      '%s: name-based (TF1) checkpoint, 4 values' % prefix,
      'Conv/weights  -  [3,3,3,8]  float32',
      'Conv/weights/ExponentialMovingAverage  -  [3,3,3,8]  float32  moving '
      'average of Conv/weights',
      "Conv/weights/Momentum  -  [3,3,3,8]  float32  optimizer slot "
      "'Momentum' of Conv/weights",
      'global_step  -  []  int64']


def test_no_checkpoint_is_one_error_line(capsys, tmp_path):
  status, lines, err = _run(capsys, [str(tmp_path / 'nowhere')])
  assert (status, lines) == (1, [])
  assert err == ('od-estimator inspect_checkpoint: error: no checkpoint at '
                 '%s: give a checkpoint prefix (model.ckpt-123, ckpt-1) or a '
                 'folder holding checkpoints\n' % (tmp_path / 'nowhere'))


def test_listed_in_od_estimator_help(capsys):
  assert cli.main(['--help']) == 0
  assert re.search(r'^  inspect_checkpoint +list what a checkpoint',
                   capsys.readouterr().out, re.MULTILINE)
