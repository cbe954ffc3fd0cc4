"""model_main --xla: the flag is accepted and a tiny training compiles."""
import os
import subprocess
import sys

import tensorflow as tf

from od_estimator.estimator import xla
from tests import tiny_ssd


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
  config = tiny_ssd.write_config(tmp_path, tmp_path / 'data')
  model_dir = tmp_path / 'model'
  result = subprocess.run(
      [sys.executable, '-m', 'od_estimator.model_main', '--xla',
       '--pipeline_config_path=%s' % config, '--model_dir=%s' % model_dir,
       '--num_train_steps=2', '--save_checkpoints_steps=2',
       # The final evaluation on 1 of the 8 validation images.
       '--sample_1_of_n_eval_examples=8',
       '--hparams_overrides=%s' % tiny_ssd.LIGHT_OVERRIDES],
      capture_output=True, text=True, timeout=600, cwd=tiny_ssd.REPO,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='0'), check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert (model_dir / 'model.ckpt-2.index').exists()
  # TensorFlow logs this once, when it first runs an XLA-compiled cluster.
  assert 'Compiled cluster using XLA' in result.stderr
