"""model_main when things go wrong, and on the original's own config.

The tiniest model (tiny_faster_rcnn's config with the fake 1x1-conv
extractor: what these tests check does not depend on the network) trains
in a model_main subprocess that is killed with SIGKILL after its first
checkpoint past step 0, and is relaunched with the same command (a
process too, whose log is read as a user reads it); it trains (model_main
in this process) with a learning rate that makes the loss Inf. Continuous
evaluation runs in-process, as an evaluator job would, on checkpoints of a
one-variable Estimator published one after the other (its loop does not
depend on the model: tests/test_model_tpu_main.py's evaluation job runs it
on the tiniest model). The upstream SSD MobileNet v2 COCO config,
pointed at synthetic records and shrunk by overrides, trains, evaluates
and exports through model_main (in this process).
"""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.estimator import model_lib
from od_estimator.config import config_util
from tests import log_capture
from tests import plain_command
from tests import tiny_faster_rcnn
from tests import tiny_ssd
from tests import upstream_folder
from tests.command_modules import run_command


# model_main with the fake extractor (tests/fake_extractor_command.py).
MODEL_MAIN = plain_command.command('tests.fake_extractor_command') + [
    'od_estimator.model_main']
# The killed run's steps: many more than the checkpoint period, so that
# the kill (polled every POLL_SECS) comes long before the run's end.
TRAIN_STEPS = 20
CHECKPOINT_EVERY = 5
POLL_SECS = 0.1
# The killed run and its relaunch evaluate only the final checkpoint (as
# train_and_evaluate always does): the evaluations of the periodic ones
# are no part of a resume.
NO_PERIODIC_EVAL = '--eval_throttle_secs=3600'
# The upstream config's run: trained, evaluated and exported.
UPSTREAM_STEPS = 1
EXPLODING_RATE = 1e30
# Evaluations read one of the 8 validation images.
EVAL_SAMPLING = '--sample_1_of_n_eval_examples=8'
TIMEOUT = 900
# The tiniest model (tests/fakes.py) for the runs around the model.
pytestmark = pytest.mark.usefixtures('fake_extractor')


class _Background:
  """A model_main subprocess started now; result() waits for it."""

  def __init__(self, args, log_prefix):
    self._stdout = open(log_prefix + '.stdout', 'w+')
    self._stderr = open(log_prefix + '.stderr', 'w+')
    self._process = subprocess.Popen(
        MODEL_MAIN + args, stdout=self._stdout, stderr=self._stderr,
        text=True, cwd=tiny_ssd.REPO)

  def result(self):
    """subprocess.CompletedProcess with the output as text."""
    self._process.wait(timeout=TIMEOUT)
    outputs = []
    for stream in (self._stdout, self._stderr):
      stream.seek(0)
      outputs.append(stream.read())
    return subprocess.CompletedProcess(self._process.args,
                                       self._process.returncode, *outputs)

  def running(self):
    return self._process.poll() is None

  def kill(self):
    """SIGKILLs the process; returns its exit status."""
    self._process.send_signal(signal.SIGKILL)
    return self._process.wait()

  def stop(self):
    if self.running():
      self._process.kill()
      self._process.wait()
    self._stdout.close()
    self._stderr.close()


@contextlib.contextmanager
def _started(args, log_prefix):
  run = _Background(args, log_prefix)
  try:
    yield run
  finally:
    run.stop()


def _step(checkpoint):
  return int(checkpoint.rsplit('-', 1)[1]) if checkpoint else None


@pytest.fixture
def upstream_config():
  """The original's ssd_mobilenet_v2_coco.config; skips when absent."""
  return upstream_folder.config_path('ssd_mobilenet_v2_coco')


@pytest.fixture
def config(tmp_path):
  """The tiny SSD's config; its synthetic records are in tmp_path/data (the
  upstream config's)."""
  return tiny_ssd.write_config(tmp_path, tmp_path / 'data')


def _upstream_overrides(data):
  """Points the upstream config at the synthetic records, small and fast."""
  return ','.join([
      'load_pretrained=false',  # fine_tune_checkpoint: PATH_TO_BE_CONFIGURED
      'train_input_path=%s' % os.path.join(data, 'shapes_train.record-*'),
      'eval_input_path=%s' % os.path.join(data, 'shapes_val.record-*'),
      'label_map_path=%s' % os.path.join(data, 'shapes_label_map.pbtxt'),
      'num_classes=3', 'batch_size=2',
      'model.ssd.image_resizer.fixed_shape_resizer.height=64',
      'model.ssd.image_resizer.fixed_shape_resizer.width=64',
      'model.ssd.feature_extractor.depth_multiplier=0.25'])


def _train_command(config, model_dir, overrides=None, steps=TRAIN_STEPS,
                   checkpoint_every=CHECKPOINT_EVERY):
  command = ['--pipeline_config_path=%s' % config,
             '--model_dir=%s' % model_dir, '--num_train_steps=%d' % steps,
             '--log_every_n_steps=1', EVAL_SAMPLING]
  if checkpoint_every:
    command.append('--save_checkpoints_steps=%d' % checkpoint_every)
  if overrides:
    command.append('--hparams_overrides=%s' % overrides)
  return command


def _kill_after_first_checkpoint(command, model_dir, log_prefix):
  """Starts model_main, SIGKILLs it once a step > 0 checkpoint exists.

  Returns:
    The step of the last checkpoint when the process was killed.
  """
  with _started(command, log_prefix) as run:
    deadline = time.monotonic() + TIMEOUT
    while not _step(tf.train.latest_checkpoint(model_dir)):
      assert run.running(), run.result().stderr[-3000:]
      assert time.monotonic() < deadline, 'no checkpoint after step 0'
      time.sleep(POLL_SECS)
    assert run.kill() == -signal.SIGKILL
  return _step(tf.train.latest_checkpoint(model_dir))


def _copy_checkpoint(source_dir, step, target_dir):
  """Publishes a checkpoint in target_dir as a trainer's saver would.

  Only the variables' files: a running trainer's saver updates the
  checkpoint state before it writes the .meta file (through a temporary
  file), which evaluation does not read.
  """
  prefix = os.path.join(source_dir, 'model.ckpt-%d' % step)
  for path in tf.io.gfile.glob(prefix + '.index') + tf.io.gfile.glob(
      prefix + '.data-*'):
    shutil.copy(path, target_dir)
  tf.compat.v1.train.update_checkpoint_state(
      target_dir, os.path.join(target_dir, 'model.ckpt-%d' % step))


@pytest.fixture(scope='module')
def resumed(tmp_path_factory, fake_extractor):
  """The tiniest model killed after its first checkpoint past step 0, then
  relaunched with the same command, to the end: a process too, as a user
  relaunches (in this process, absl's log level depends on the commands
  run before it).

  Returns:
    (model_dir, step of the last checkpoint at the kill, the relaunch's
    subprocess.CompletedProcess, its log).
  """
  del fake_extractor  # The processes register it themselves.
  root = tmp_path_factory.mktemp('resumed')
  config = tiny_faster_rcnn.write_config(root, root / 'data',
                                         extractor='fake')
  model_dir = str(root / 'model')
  command = _train_command(config, model_dir) + [NO_PERIODIC_EVAL]
  killed_at = _kill_after_first_checkpoint(command, model_dir,
                                           str(root / 'killed'))
  with _started(command, str(root / 'relaunch')) as run:
    relaunch = run.result()
  return model_dir, killed_at, relaunch, relaunch.stderr


def _eval_parts(pipeline_config_path, overrides, model_dir):
  """Estimator and inputs of a run of that config, evaluating one image."""
  return model_lib.create_estimator_and_inputs(
      tf.estimator.RunConfig(model_dir=model_dir),
      hparams=config_util.parse_hparams_overrides(overrides),
      pipeline_config_path=pipeline_config_path,
      sample_1_of_n_eval_examples=8)


class _TrainerAhead:
  """The Estimator; once its first evaluation is done, publish_next runs."""

  def __init__(self, estimator, publish_next):
    self._estimator = estimator
    self._publish_next = publish_next
    self.evaluated = []
    self.results = []

  def evaluate(self, **kwargs):
    self.evaluated.append(_step(kwargs['checkpoint_path']))
    self.results.append(self._estimator.evaluate(**kwargs))
    if self._publish_next:
      self._publish_next()
      self._publish_next = None
    return self.results[-1]


def _one_weight_model_fn(features, labels, mode):
  """loss = weight * sum(features), one gradient descent step a step."""
  del labels  # Unused.
  weight = tf.compat.v1.get_variable('weight', [],
                                     initializer=tf.ones_initializer())
  loss = weight * tf.reduce_sum(features)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.5).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _one_batch():
  return tf.data.Dataset.from_tensors((tf.ones([1, 2]), tf.zeros([1])))


# A one-variable Estimator evaluates the step-0 checkpoint, then the final
# one, of its one-step training, in a directory where each appears only when
# the previous evaluation is done.
def test_continuous_eval_stops_after_the_final_checkpoint(tmp_path):
  trained_dir = str(tmp_path / 'trained')
  tf.estimator.Estimator(_one_weight_model_fn,
                         config=tiny_ssd.run_config(trained_dir)).train(
                             _one_batch, max_steps=1)
  final_step = 1
  watched = str(tmp_path / 'train')
  os.makedirs(watched)
  _copy_checkpoint(trained_dir, 0, watched)

  def publish_final():
    _copy_checkpoint(trained_dir, final_step, watched)
  estimator = _TrainerAhead(
      tf.estimator.Estimator(_one_weight_model_fn, str(tmp_path / 'eval')),
      publish_final)
  with log_capture.absl_messages() as messages:
    metrics = model_lib.continuous_eval(
        estimator, watched, _one_batch, final_step, 'validation_data',
        timeout_secs=TIMEOUT)
  assert estimator.evaluated == [0, final_step]
  # The final evaluation's metrics: the loss with the trained weight (1 - 0.5
  # * 2, times the features' sum), not the initial one's (1, times 2).
  assert metrics is estimator.results[-1]
  assert metrics['global_step'] == final_step
  assert [result['loss'] for result in estimator.results] == [2.0, 0.0]
  assert 'Evaluated the final checkpoint (step %d).' % final_step in messages
  assert not any('Stopping evaluation' in line for line in messages)


def test_relaunch_after_sigkill_resumes_from_the_last_checkpoint(resumed):
  model_dir, killed_at, relaunch, log = resumed
  # A periodic checkpoint before the run's end: the relaunch has steps left.
  assert killed_at % CHECKPOINT_EVERY == 0, killed_at
  assert 0 < killed_at < TRAIN_STEPS, killed_at
  assert relaunch.returncode == 0, relaunch.stderr[-3000:]
  assert 'Restoring parameters from %s' % os.path.join(
      model_dir, 'model.ckpt-%d' % killed_at) in log
  # The first step run follows the checkpoint's: nothing is trained twice.
  first = re.findall(r'step (\d+)/\d+, loss \S+ \(first step after resuming '
                     r'from step (\d+)\)', log)
  assert first == [(str(killed_at + 1), str(killed_at))], log[-3000:]
  saved = [int(step) for step in
           re.findall(r'Saving checkpoints for (\d+) into', log)]
  assert saved[0] == killed_at and saved[-1] == TRAIN_STEPS, saved
  assert 'step %d/%d' % (TRAIN_STEPS, TRAIN_STEPS) in log
  assert _step(tf.train.latest_checkpoint(model_dir)) == TRAIN_STEPS


def test_upstream_ssd_mobilenet_v2_coco_config_trains(upstream_config,
                                                      config, tmp_path):
  """The user's own config trains, evaluates and exports (model_main in
  this process); `config` writes the synthetic records it reads."""
  del config  # See above.
  model_dir = str(tmp_path / 'model')
  result = run_command('model_main', _train_command(
      upstream_config, model_dir, _upstream_overrides(str(tmp_path / 'data')),
      steps=UPSTREAM_STEPS, checkpoint_every=None))
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'Evaluation at step %d:' % UPSTREAM_STEPS in result.stdout
  as_run = config_util.get_configs_from_pipeline_file(
      os.path.join(model_dir, 'pipeline.config'))
  ssd = as_run['model'].ssd
  assert ssd.feature_extractor.type == 'ssd_mobilenet_v2'
  assert ssd.num_classes == 3
  assert ssd.image_resizer.fixed_shape_resizer.height == 64
  assert ssd.loss.hard_example_miner.num_hard_examples == 3000
  assert as_run['train_config'].batch_size == 2
  assert [option.WhichOneof('preprocessing_step') for option in
          as_run['train_config'].data_augmentation_options] == [
              'random_horizontal_flip', 'ssd_random_crop']
  assert tf.io.gfile.glob(os.path.join(model_dir, 'export', 'Servo', '*',
                                       'saved_model.pb'))


def test_non_finite_loss_stops_with_the_last_good_checkpoint(tmp_path):
  """The tiniest model with a learning rate that blows the weights up.

  Step 0's loss is finite; its update makes step 1's loss Inf (NaN a step
  later). model_main runs in this process (run_command: its exit status
  and output as `python -m` gives them).
  """
  config = tiny_faster_rcnn.write_config(tmp_path, tmp_path / 'data',
                                         extractor='fake')
  model_dir = str(tmp_path / 'exploding')
  overrides = 'learning_rate=%g' % EXPLODING_RATE
  # Seeded: from some initializations (2 of 20 seeds) the exploded update
  # leaves every activation dead and the loss finite; seed 1 explodes.
  result = run_command('model_main',
                       _train_command(config, model_dir, overrides) +
                       ['--random_seed=1'])
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr
  last = result.stderr.strip().splitlines()[-1]
  good = os.path.join(model_dir, 'model.ckpt-0')
  assert last.startswith('error: training stopped because the loss became '
                         'NaN or Inf at step 1. The last good checkpoint is '
                         '%s. ' % good), last
  # The broken update was never applied, so never saved: without the check
  # step 1 would run and the next periodic checkpoint hold NaN weights.
  assert tf.train.latest_checkpoint(model_dir) == good
  reader = tf.train.load_checkpoint(good)
  for name in reader.get_variable_to_shape_map():
    value = reader.get_tensor(name)
    if np.issubdtype(value.dtype, np.floating):
      assert np.all(np.isfinite(value)), name


def test_continuous_eval_timeout_without_checkpoints_says_so(config,
                                                             tmp_path):
  parts = _eval_parts(config, tiny_ssd.LIGHT_OVERRIDES, str(tmp_path / 'eval'))
  empty = str(tmp_path / 'train')
  os.makedirs(empty)
  with log_capture.absl_messages() as messages:
    metrics = model_lib.continuous_eval(
        parts['estimator'], empty, parts['eval_input_fns'][0], TRAIN_STEPS,
        'validation_data', timeout_secs=1)
  assert metrics is None
  assert ('Stopping evaluation: no checkpoint appeared in %s within 1 s, so '
          'nothing was evaluated; check that it is the training model_dir.'
          % empty) in messages
