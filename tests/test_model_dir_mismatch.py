"""A --model_dir whose checkpoint belongs to another model (resume_check).

The tiniest model trained one step with 3 classes (tests/trained_models.py's
one_step_fake_faster_rcnn, read only: the check does not depend on the
network); model_main (run in this process) relaunched into the same
model_dir with 5 classes must stop with one `error:` line naming the
variables whose shapes differ, before it writes or changes any file there. A one-variable model shows the check in the
Estimator's own graph: resuming, a mismatch, under MirroredStrategy, and at
the last step (evaluation only).
"""
import os
import re

import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import model_lib
from od_estimator.estimator import resume_check
from tests import command_modules
from tests import fakes
from tests import file_trees


def test_differences_leave_out_slots_and_extra_checkpoint_entries():
  checkpoint = {'global_step': [], 'Box/weights': [3, 12],
                'Box/weights/Momentum': [3, 12], 'Old/only': [2]}
  model = {'global_step': [], 'Box/weights': [3, 18],
           'Box/weights/Momentum': [3, 18], 'New/weights': [4],
           'New/weights/Momentum': [4]}
  mismatched, missing = resume_check.differences(checkpoint, model)
  assert mismatched == [('Box/weights', [3, 12], [3, 18])]
  assert missing == ['New/weights']
  assert resume_check.differences(checkpoint, {'Box/weights': [3, 12]}) == (
      [], [])


def test_message_names_shapes_missing_variables_and_remedies():
  message = resume_check.mismatch_message(
      'train', 'train/model.ckpt-7', [('Box/weights', [3, 12], [3, 18])],
      ['New/v%d' % i for i in range(22)])
  assert 'Box/weights [3, 12] vs [3, 18]' in message
  assert 'Not in the checkpoint: 22 variable(s): New/v0' in message
  assert '(and 2 more)' in message
  assert 'new --model_dir' in message
  assert 'fine_tune_checkpoint: "train/model.ckpt-7"' in message


@pytest.fixture(scope='module')
def trained(one_step_fake_faster_rcnn):
  """One step of the 3-class tiniest model; returns (root, model_dir)."""
  root, _, model_dir = one_step_fake_faster_rcnn
  return root, model_dir


def test_model_main_stops_before_touching_the_model_dir(trained, tmp_path):
  root, model_dir = trained
  with open(root / 'pipeline.config') as f:
    text = f.read()
  assert 'num_classes: 3' in text
  five_classes = tmp_path / 'five_classes.config'
  five_classes.write_text(text.replace('num_classes: 3', 'num_classes: 5'))
  before = file_trees.snapshot(model_dir)
  with fakes.fake_faster_rcnn_extractor():
    result = command_modules.run_command('model_main', [
        '--pipeline_config_path=%s' % five_classes,
        '--model_dir=%s' % model_dir, '--num_train_steps=2'])
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr, result.stderr[-3000:]
  error_lines = [line for line in result.stderr.splitlines()
                 if line.startswith('error: ')]
  assert len(error_lines) == 1, result.stderr[-3000:]
  error = error_lines[0]
  assert re.search(r'SecondStageBoxPredictor/ClassPredictor/\w+ '
                   r'\[[\d, ]+\] vs \[[\d, ]+\]', error), error
  assert os.path.join(model_dir, 'model.ckpt-1') in error
  assert 'new --model_dir' in error and 'fine_tune_checkpoint' in error
  assert file_trees.snapshot(model_dir) == before


def _model_fn(features, labels, mode, params):
  """A one-variable model whose width is the feature size."""
  del labels, params  # Unused.
  weights = tf.compat.v1.get_variable('Box/weights',
                                      [features.shape[-1], 2])
  loss = tf.reduce_sum(tf.matmul(features, weights))
  if mode != tf.estimator.ModeKeys.TRAIN:
    return tf.estimator.EstimatorSpec(mode, loss=loss)
  step = tf.compat.v1.train.get_global_step()
  return tf.estimator.EstimatorSpec(
      mode, loss=loss,
      train_op=tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(
          loss, global_step=step))


def _input_fn(width):
  def input_fn(params):
    del params  # Unused.
    return tf.data.Dataset.from_tensors(
        (tf.zeros([1, width]), tf.zeros([]))).repeat()
  return input_fn


def _estimator(model_dir, calls, **run_config):
  """An Estimator of _model_fn resuming from model_dir's checkpoint through
  checked_model_fn (then() appends to `calls`)."""
  model_fn = resume_check.checked_model_fn(
      _model_fn, model_dir, tf.train.latest_checkpoint(model_dir),
      lambda: calls.append(model_dir))
  return tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(
      model_dir=model_dir, **run_config))


def _resume(model_dir, width, calls, **run_config):
  """Trains _model_fn on features of `width` to step 3 (_estimator)."""
  _estimator(model_dir, calls, **run_config).train(_input_fn(width),
                                                   max_steps=3)


@pytest.fixture
def one_step(tmp_path):
  """A model_dir where _model_fn trained one step on width-3 features."""
  model_dir = str(tmp_path / 'model')
  tf.estimator.Estimator(_model_fn, model_dir).train(_input_fn(3),
                                                     max_steps=1)
  return model_dir


def test_a_fitting_checkpoint_resumes_after_then_ran_once(one_step):
  calls = []
  _resume(one_step, 3, calls)
  assert calls == [one_step]
  assert tf.train.latest_checkpoint(one_step).endswith('model.ckpt-3')


def test_a_mismatch_raises_before_the_estimator_writes(one_step):
  before, calls = file_trees.snapshot(one_step), []
  with pytest.raises(errors.UserInputError) as raised:
    _resume(one_step, 4, calls)
  assert 'Box/weights [3, 2] vs [4, 2]' in str(raised.value)
  assert 'Not in the checkpoint' not in str(raised.value)
  assert not calls and file_trees.snapshot(one_step) == before


def test_variables_missing_from_the_checkpoint_are_named(tmp_path):
  model_dir = str(tmp_path)
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    tf.compat.v1.get_variable('Box/weights', [3, 2])
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(session, model_dir + '/model.ckpt',
                                      global_step=step)
  with pytest.raises(errors.UserInputError,
                     match=r'Not in the checkpoint: 1 variable\(s\): '
                     r'Box/weights/Momentum\.'):
    _resume(model_dir, 3, [])


def test_replicas_are_checked_once_all_are_built(one_step):
  """Under MirroredStrategy each replica calls model_fn; the check runs
  once, when every replica's variables (and slots) exist."""
  kwargs = model_lib.mirrored_run_config_kwargs(2, 'CPU')
  calls = []
  with pytest.raises(errors.UserInputError, match=r'\[3, 2\] vs \[4, 2\]'):
    _resume(one_step, 4, calls, **kwargs)
  _resume(one_step, 3, calls, **kwargs)
  assert calls == [one_step]
  assert tf.train.latest_checkpoint(one_step).endswith('model.ckpt-3')


def test_a_finished_training_is_checked_by_its_evaluation(one_step):
  """At the last step the Estimator skips training: the evaluation graph
  is checked instead, before anything is written."""
  before, calls = file_trees.snapshot(one_step), []
  estimator = _estimator(one_step, calls)
  estimator.train(_input_fn(4), max_steps=1)
  assert file_trees.snapshot(one_step) == before
  with pytest.raises(errors.UserInputError, match=r'\[3, 2\] vs \[4, 2\]'):
    estimator.evaluate(_input_fn(4), steps=1)
  assert not calls and file_trees.snapshot(one_step) == before
  _estimator(one_step, calls).evaluate(_input_fn(3), steps=1)
  assert calls == [one_step]


def test_an_evaluation_only_run_names_its_checkpoint_dir(one_step):
  """model_main --checkpoint_dir: the evaluation graph is checked before the
  restore, which otherwise failed deep in the graph with a traceback."""
  checkpoint = tf.train.latest_checkpoint(one_step)
  model_fn = resume_check.checked_model_fn(
      _model_fn, one_step, checkpoint, lambda: None, evaluating=True)
  before = file_trees.snapshot(one_step)
  estimator = tf.estimator.Estimator(model_fn)
  with pytest.raises(errors.UserInputError) as raised:
    estimator.evaluate(_input_fn(4), steps=1, checkpoint_path=checkpoint)
  message = str(raised.value)
  assert message.startswith('--checkpoint_dir=%s holds checkpoint %s' % (
      one_step, checkpoint))
  assert 'cannot be evaluated with this config' in message
  assert 'Box/weights [3, 2] vs [4, 2]' in message
  assert file_trees.snapshot(one_step) == before
