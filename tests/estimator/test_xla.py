"""model_main --xla: the flag is accepted and a tiny training compiles."""
import os
import signal
import sys

import tensorflow as tf

from od_estimator.estimator import xla
from tests import signalled_training
from tests import tiny_faster_rcnn


def test_jit_session_config_keeps_the_given_options():
  given = tf.compat.v1.ConfigProto(allow_soft_placement=True,
                                   device_count={'CPU': 2})
  config = xla.jit_session_config(given)
  assert config.graph_options.optimizer_options.global_jit_level == (
      tf.compat.v1.OptimizerOptions.ON_1)
  assert config.device_count['CPU'] == 2 and config.allow_soft_placement
  assert not given.graph_options.optimizer_options.global_jit_level
  # Without one: the Estimator's default (soft placement) plus the JIT.
  assert xla.jit_session_config().allow_soft_placement
  assert '--tf_xla_cpu_global_jit' in os.environ['TF_XLA_FLAGS'].split()


def test_model_main_trains_two_steps_with_xla(tmp_path):
  # The tiniest model (tiny_faster_rcnn's, 1x1-conv extractor): what XLA
  # compiles is the flag's subject, not the network, and the light SSD's
  # step takes several times as long to cluster and compile.
  config = tiny_faster_rcnn.write_config(tmp_path, tmp_path / 'data',
                                         extractor='fake')
  model_dir = str(tmp_path / 'model')
  # SIGTERM once two steps are logged: a checkpoint at the step reached,
  # without the evaluation and export that are not the subject here.
  training = signalled_training.Training(
      # The command as users run it (with the fake extractor registered):
      # XLA's clustering beside grappler's.
      [sys.executable, '-m', 'tests.fake_extractor_command',
       'od_estimator.model_main'] + signalled_training.FLAGS + [
           '--xla', '--pipeline_config_path=%s' % config,
           '--model_dir=%s' % model_dir],
      str(tmp_path / 'xla.log'),
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='0'))
  assert training.signal_after_step(signal.SIGTERM, 1) == 0, (
      training.log()[-3000:])
  assert signalled_training.checkpoint_step(model_dir) >= 2
  # TensorFlow logs this once, when it first runs an XLA-compiled cluster.
  assert 'Compiled cluster using XLA' in training.log()
