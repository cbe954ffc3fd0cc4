"""train_config.use_bfloat16 off TPU: ignored with one note, as the original.

bfloat16 is a TPU format; on CPU and GPU the input pipeline and the model
stay float32 and training runs.
"""
import numpy as np
import tensorflow as tf

from od_estimator.estimator import model_lib
from od_estimator.config import config_util
from tests import log_capture
from tests import tiny_ssd


def test_use_bfloat16_trains_on_cpu_with_one_note(tmp_path):
  config = tiny_ssd.write_config(tmp_path, tmp_path / 'data')
  hparams = config_util.parse_hparams_overrides(tiny_ssd.LIGHT_OVERRIDES)
  hparams['use_bfloat16'] = True
  run_config = tf.estimator.RunConfig(
      model_dir=str(tmp_path / 'train'), save_checkpoints_secs=None,
      save_checkpoints_steps=None, save_summary_steps=None,
      log_step_count_steps=None)
  with log_capture.absl_messages() as messages:
    parts = model_lib.create_estimator_and_inputs(
        run_config, hparams=hparams, pipeline_config_path=config)
    losses = []
    parts['estimator'].train(
        parts['train_input_fn'], max_steps=1,
        hooks=[tf.compat.v1.train.LoggingTensorHook(
            {'loss': 'total_loss:0'}, every_n_iter=1,
            formatter=lambda values: losses.append(values['loss']) or '')])
  assert parts['configs']['train_config'].use_bfloat16
  assert len(losses) == 1 and np.isfinite(losses[0])
  notes = [m for m in messages if 'use_bfloat16 is ignored off TPU' in m]
  assert len(notes) == 1, messages
