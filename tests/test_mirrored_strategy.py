"""MirroredStrategy training of SSD through the Estimator matches one device.

As tests/mirrored_training.py compares them: one step of tiny_ssd's model
with 2 CPU replicas against one device, on batches [a, b, a, b]. Its
backbone is tests/narrow_ssd.py's (strided convs with batch norm, as
MobileNet's, a few instead of dozens): what the test checks is the
strategy's updates of an SSD (its batch norms, box predictor and loss),
not the network; graph building is most of its time.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.estimator import model_lib
from od_estimator.config import config_util
from tests import mirrored_training
from tests import narrow_ssd
from tests import tiny_ssd
from tests.command_modules import run_command


def _repeated_pair_config(root):
  """A config whose train batches are always records [a, b, a, b].

  Also without augmentation and class-head dropout (random), with a
  well-conditioned batch norm epsilon, and with momentum SGD, whose step
  is linear in the gradient (Adam's first step, about lr * sign(gradient),
  would blow rounding noise up to full steps).
  """
  path = tiny_ssd.write_config(root, root / 'data')
  configs = config_util.get_configs_from_pipeline_file(path)
  mirrored_training.use_repeated_pair(
      configs, str(root / 'data' / 'shapes_train.record-*'), root)
  ssd = configs['model'].ssd
  predictor = ssd.box_predictor.convolutional_box_predictor
  predictor.use_dropout = False
  # A batch norm over few values per channel (a MobileNet's 1x1 maps see 2)
  # with a tiny epsilon blows rounding differences between 2- and 4-image
  # batches up to several percent in the backward pass.
  for hyperparams in (ssd.feature_extractor.conv_hyperparams,
                      predictor.conv_hyperparams):
    hyperparams.batch_norm.epsilon = 0.1
  momentum = configs['train_config'].optimizer.momentum_optimizer
  momentum.learning_rate.constant_learning_rate.learning_rate = 0.01
  momentum.momentum_optimizer_value = 0.9
  config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), str(root))
  return path


# tiny_ssd's size and batch, without moving averages, on the narrow backbone.
OVERRIDES = ','.join([tiny_ssd.TINY_OVERRIDES,
                      'train_config.optimizer.use_moving_average=false',
                      narrow_ssd.CONFIG_FIELDS])


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """Trains one step on one device, then from there with 2 replicas."""
  with narrow_ssd.registered():
    return mirrored_training.train_single_then_mirrored(
        tmp_path_factory, _repeated_pair_config, OVERRIDES)


def test_one_step_loss_matches_single_device(trained):
  single_dir, mirrored_dir = trained
  mirrored_training.assert_losses_match(
      mirrored_training.first_losses(single_dir),
      mirrored_training.first_losses(mirrored_dir), SUMMED_TERMS)


# The longest sum behind any gradient, batch mean or loss of this model: the
# batch (4 images, tiny_ssd.TINY_OVERRIDES) times the 32x32 positions of
# the first, stride-2 layer on its 64x64 inputs.
SUMMED_TERMS = 4 * 32 * 32


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
  before, single, mirrored = mirrored_training.trained_variables(*trained)
  tossed = _coin_toss_channels(before, single, mirrored,
                               _batch_norm_decay(single_dir))
  channels = np.concatenate(list(tossed.values()))
  assert channels.sum() <= channels.size // 100, channels.sum()
  # Batch norm's unbiased variance corrects by n / (n - 1): per replica n
  # counts 2 images, on one device 4, which differs on small maps.
  for name in [name for name in single if name.endswith('moving_variance')]:
    del single[name], mirrored[name]
  mirrored_training.assert_updates_match(
      before, single, mirrored, SUMMED_TERMS,
      lambda name: _comparable(name, tossed))


def test_num_gpus_without_gpus_is_a_one_line_error(tmp_path, monkeypatch):
  # The command in this process (its exit status and lines as `python -m`
  # gives them), with every GPU hidden as CUDA_VISIBLE_DEVICES='' would.
  list_physical_devices = tf.config.list_physical_devices
  monkeypatch.setattr(
      tf.config, 'list_physical_devices',
      lambda device_type=None: [] if device_type == 'GPU' else
      list_physical_devices(device_type))
  config = tiny_ssd.write_config(tmp_path, tmp_path / 'data')
  result = run_command('model_main', [
      '--pipeline_config_path=%s' % config,
      '--model_dir=%s' % str(tmp_path / 'model'), '--num_gpus=2'])
  assert result.returncode == 1
  assert 'error: --num_gpus=2 asks for 2 GPUs but TensorFlow sees 0' in (
      result.stderr)
  assert 'Traceback' not in result.stderr


def test_other_device_types_are_rejected():
  with pytest.raises(ValueError, match='device_type must be GPU or CPU'):
    model_lib.mirrored_run_config_kwargs(2, 'TPU')
