"""MirroredStrategy training through the Estimator matches one device.

Two CPU session devices stand in for two GPUs. Every training batch is the
same two images twice, so each replica's half-batch has the whole batch's
content: one step from the same checkpoint must then give the same loss and
the same updated variables with 2 replicas as with 1 device.
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from od_estimator.estimator import model_lib
from od_estimator.config import config_util
from tests import tiny_ssd

NUM_REPLICAS = 2


def _repeated_pair_config(root):
  """A config whose train batches are always records [a, b, a, b].

  Also without augmentation and class-head dropout (random), with a
  well-conditioned batch norm epsilon, and with momentum SGD, whose step
  is linear in the gradient (Adam's first step, about lr * sign(gradient),
  would blow rounding noise up to full steps).
  """
  path = tiny_ssd.write_config(root, root / 'data')
  first_shard = sorted((root / 'data').glob('shapes_train.record-*'))[0]
  pair = list(tf.compat.v1.io.tf_record_iterator(str(first_shard)))[:2]
  pairs = str(root / 'pairs.record')
  with tf.io.TFRecordWriter(pairs) as writer:
    for record in pair * 8:
      writer.write(record)
  configs = config_util.get_configs_from_pipeline_file(path)
  ssd = configs['model'].ssd
  predictor = ssd.box_predictor.convolutional_box_predictor
  predictor.use_dropout = False
  # The smallest feature maps are 1x1: their batch norms see 2 values per
  # channel, and with a tiny epsilon the backward pass blows rounding
  # differences between 2- and 4-image batches up to several percent.
  for hyperparams in (ssd.feature_extractor.conv_hyperparams,
                      predictor.conv_hyperparams):
    hyperparams.batch_norm.epsilon = 0.1
  train_config = configs['train_config']
  train_config.ClearField('data_augmentation_options')
  momentum = train_config.optimizer.momentum_optimizer
  momentum.learning_rate.constant_learning_rate.learning_rate = 0.01
  momentum.momentum_optimizer_value = 0.9
  reader = configs['train_input_config']
  reader.tf_record_input_reader.ClearField('input_path')
  reader.tf_record_input_reader.input_path.append(pairs)
  reader.shuffle = False
  reader.num_readers = 1
  config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), str(root))
  return path


def _train_one_step(config, model_dir, **run_config_kwargs):
  """One training step as model_main builds it; summaries every step.

  No graph.pbtxt or meta graph: the checkpoints and summaries are all the
  tests read.
  """
  run_config = tf.estimator.RunConfig(
      model_dir=model_dir, checkpoint_save_graph_def=False,
      save_summary_steps=1, log_step_count_steps=None, **run_config_kwargs)
  parts = model_lib.create_estimator_and_inputs(
      run_config=run_config,
      hparams=config_util.parse_hparams_overrides(tiny_ssd.LIGHT_OVERRIDES),
      pipeline_config_path=config, train_steps=1)
  parts['estimator'].train(parts['train_input_fn'], max_steps=1)


def _copy_initial_checkpoint(source_dir, target_dir):
  """Makes target_dir resume from source_dir's step-0 checkpoint."""
  os.makedirs(target_dir)
  for path in os.listdir(source_dir):
    if path.startswith('model.ckpt-0.'):
      shutil.copy(os.path.join(source_dir, path), target_dir)
  with open(os.path.join(target_dir, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-0"\n')


def _first_losses(model_dir):
  """(Estimator's loss, Loss/total_loss) summaries of the first step.

  Under MirroredStrategy the first is the mean over replicas, the second
  the first replica's. The Estimator's summary is tagged `loss`, or
  `loss_1` when the graph has an op named `loss` already.
  """
  accumulator = event_accumulator.EventAccumulator(model_dir)
  accumulator.Reload()
  tags = accumulator.Tags()['scalars']
  estimator_tag = [tag for tag in tags if re.fullmatch(r'loss(_\d+)?', tag)]
  assert len(estimator_tag) == 1, tags
  return (accumulator.Scalars(estimator_tag[0])[0].value,
          accumulator.Scalars('Loss/total_loss')[0].value)


def _variables(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """Trains one step on one device, then from there with 2 replicas."""
  root = tmp_path_factory.mktemp('mirrored')
  config = _repeated_pair_config(root)
  single_dir, mirrored_dir = str(root / 'single'), str(root / 'mirrored')
  _train_one_step(config, single_dir)
  _copy_initial_checkpoint(single_dir, mirrored_dir)
  _train_one_step(config, mirrored_dir,
                  **model_lib.mirrored_run_config_kwargs(NUM_REPLICAS, 'CPU'))
  return single_dir, mirrored_dir


def test_one_step_loss_matches_single_device(trained):
  single_dir, mirrored_dir = trained
  single, mirrored = _first_losses(single_dir), _first_losses(mirrored_dir)
  assert single[0] > 0
  np.testing.assert_allclose(mirrored, single, rtol=1e-4)


# The longest sum behind any gradient or batch mean of this model: the
# batch (4 images, tiny_ssd.LIGHT_OVERRIDES) times the 32x32 positions of
# the first, stride-2 layer on its 64x64 inputs.
SUMMED_TERMS = 4 * 32 * 32


def _kind(name):
  """What a variable's one-step update is, for its tolerance."""
  if name.endswith('/Momentum'):
    return 'gradient'  # Momentum's slot after step 1 is the gradient.
  if name.endswith('moving_mean'):
    return 'batch mean'  # (1 - decay) times the batch mean.
  return 'variable'  # -learning_rate times its gradient.


def _update_tolerances(before, after):
  """Noise floor of one-step updates, per kind, from float32 rounding.

  Both runs add the same per-image and per-position terms, grouped
  differently (2-image replica sums then an all-reduce, vs 4-image sums,
  and other kernel blocking in every reduction). A float32 sum of n terms
  is within (n - 1) eps / 2 sum(|terms|) of the exact one, so two orders
  differ by up to n eps sum(|terms|), relative to the terms, not to the
  result: a gradient that cancels to ~0 (a batch norm's beta that another
  batch norm follows) is all noise. The terms are errors backpropagated
  from the heads, or activations, no larger than the model's whole update
  of that kind; a factor 2 covers the rounding they carry from the earlier
  layers (and the variable's own, eps |value|, is far below). Updates
  under this floor (this nearly constant backbone's, ~1e-5, mostly weight
  decay) are checked only to it.
  """
  norms = {}
  for name, value in after.items():
    kind = _kind(name)
    norms[kind] = norms.get(kind, 0.) + float(
        np.sum(np.square(value - before[name], dtype=np.float64)))
  eps = np.finfo(np.float32).eps
  return {kind: 2 * SUMMED_TERMS * eps * np.sqrt(norm)
          for kind, norm in norms.items()}


def _coin_toss_channels(before, single, mirrored, decay):
  """{batch norm scope: mask of its channels whose gate was a coin toss}.

  A channel constant over the batch (a dead feature, a 1x1 map) normalizes
  to rounding noise around 0, so whether ReLU6 passes its gradient to beta
  and gamma depends on summation order: one run moves its beta, the other
  leaves it exactly where it was. Such a channel's batch variance is ~0,
  so its moving variance only decays.
  """
  tossed = {}
  for name in single:
    if name.endswith('/moving_variance'):
      scope = name[:-len('/moving_variance')]
      beta = scope + '/beta'
      still = [run[beta] == before[beta] for run in (single, mirrored)]
      tossed[scope] = (np.isclose(single[name], decay * before[name],
                                  rtol=1e-6, atol=0) &
                       (still[0] != still[1]))
  return tossed


def _batch_norm_decay(single_dir):
  """The one batch norm decay of the model trained in single_dir."""
  ssd = config_util.get_configs_from_pipeline_file(os.path.join(
      os.path.dirname(single_dir), 'pipeline.config'))['model'].ssd
  decays = {ssd.feature_extractor.conv_hyperparams.batch_norm.decay,
            ssd.box_predictor.convolutional_box_predictor.conv_hyperparams
            .batch_norm.decay}
  assert len(decays) == 1, decays
  return decays.pop()


def _comparable(name, tossed):
  """The elements of variable `name` whose updates the runs must share."""
  for suffix in ('/beta', '/gamma', '/beta/Momentum', '/gamma/Momentum'):
    if name.endswith(suffix):
      return ~tossed[name[:-len(suffix)]]
  return Ellipsis


def test_one_step_updates_match_single_device(trained):
  single_dir, mirrored_dir = trained
  before = _variables(os.path.join(single_dir, 'model.ckpt-0'))
  single = _variables(os.path.join(single_dir, 'model.ckpt-1'))
  mirrored = _variables(os.path.join(mirrored_dir, 'model.ckpt-1'))
  assert sorted(mirrored) == sorted(single)
  assert mirrored.pop('global_step') == single.pop('global_step') == 1
  tossed = _coin_toss_channels(before, single, mirrored,
                               _batch_norm_decay(single_dir))
  channels = np.concatenate(list(tossed.values()))
  assert channels.sum() <= channels.size // 100, channels.sum()
  # Batch norm's unbiased variance corrects by n / (n - 1): per replica n
  # counts 2 images, on one device 4, which differs on small maps.
  for name in [name for name in single if name.endswith('moving_variance')]:
    del single[name], mirrored[name]
  tolerances = _update_tolerances(before, single)
  moved = 0
  for name, value in single.items():
    step = value - before[name]
    moved += bool(np.any(step))
    kept = _comparable(name, tossed)
    error = np.linalg.norm((mirrored[name] - before[name] - step)[kept])
    assert error <= tolerances[_kind(name)], (name, error)
  assert moved > len(single) // 2  # the step really trained the model


def test_num_gpus_without_gpus_is_a_one_line_error(tmp_path):
  config = tiny_ssd.write_config(tmp_path, tmp_path / 'data')
  result = subprocess.run(
      [sys.executable, '-m', 'od_estimator.model_main',
       '--pipeline_config_path=%s' % config,
       '--model_dir=%s' % str(tmp_path / 'model'), '--num_gpus=2'],
      capture_output=True, text=True, timeout=300, cwd=tiny_ssd.REPO,
      check=False, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
                            CUDA_VISIBLE_DEVICES=''))
  assert result.returncode == 1
  assert 'error: --num_gpus=2 asks for 2 GPUs but TensorFlow sees 0' in (
      result.stderr)
  assert 'Traceback' not in result.stderr


def test_other_device_types_are_rejected():
  with pytest.raises(ValueError, match='device_type must be GPU or CPU'):
    model_lib.mirrored_run_config_kwargs(2, 'TPU')
