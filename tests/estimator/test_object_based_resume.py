"""Training resumes from a folder of the original TF2 trainer's ckpt-N.

The tiny TF2 SSD (tiny_tf2_ssd) resumes from a folder of ckpt-1 and ckpt-2
laid out as the original writes them (momentum slots, `step`), one step
of model_main_tf2; the model.ckpt-N saved as its session starts holds
the state restored, compared value by value with ckpt-2's. A folder of
another model (more classes) is refused in one line. The Keras slot names
read are checked against those the original's ckpt-N hold
(tests/data/tf2_optimizer_slots).
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.builders import optimizer_builder
from od_estimator.config import config_util
from od_estimator.estimator import object_based_resume
from tests import file_trees
from tests import tf2_checkpoints
from tests import tiny_tf2_ssd
from tests.command_modules import run_command

# Training steps of the original's ckpt-1 and ckpt-2.
TF2_STEPS = (3, 6)
SLOT_MARK = '/.OPTIMIZER_SLOT/optimizer/momentum/'
BOX_BIAS = 'BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/bias'
CLASS_BIAS = 'BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/bias'


def _learning_rate(config, step):
  """The config's learning rate at `step`, as our optimizer computes it."""
  optimizer_config = config_util.get_configs_from_pipeline_file(config)[
      'train_config'].optimizer
  with tf.Graph().as_default():
    _, (rate,) = optimizer_builder.build(optimizer_config,
                                         tf.constant(step, tf.int64))
    with tf.compat.v1.Session() as session:
      return float(session.run(rate))


@pytest.fixture(scope='module')
def resumed(tmp_path_factory):
  """One step of model_main_tf2 in a copy of the original's folder.

  Returns:
    (result, folder, ckpt-2's prefix, config, the folder's ckpt-* files
    before).
  """
  root = tmp_path_factory.mktemp('tf2_resume')
  config = tiny_tf2_ssd.write_config(root, root / 'data', batch_size=2)
  folder = str(root / 'tf2_train')
  last = tiny_tf2_ssd.write_training_folder(folder, config, TF2_STEPS)
  before = _original_files(folder)
  result = run_command('model_main_tf2', [
      '--pipeline_config_path=%s' % config, '--model_dir=%s' % folder,
      '--num_train_steps=%d' % (TF2_STEPS[-1] + 1)])
  return result, folder, last, config, before


def _original_files(folder):
  return {name: facts for name, facts in file_trees.snapshot(folder).items()
          if name.startswith('ckpt-')}


def test_training_continues_at_the_checkpoints_step(resumed):
  result, folder, _, _, before = resumed
  assert result.returncode == 0, result.stderr[-3000:]
  files = os.listdir(folder)
  for step in TF2_STEPS[-1], TF2_STEPS[-1] + 1:
    assert 'model.ckpt-%d.index' % step in files, files
  state = tf.train.get_checkpoint_state(folder)
  assert os.path.basename(state.model_checkpoint_path) == 'model.ckpt-%d' % (
      TF2_STEPS[-1] + 1)
  # Ours only: the Saver never rotates the original's files away.
  assert all(os.path.basename(path).startswith('model.ckpt-')
             for path in state.all_model_checkpoint_paths)
  assert _original_files(folder) == before
  assert 'start afresh' not in result.stderr


def test_weights_step_and_momentum_are_the_checkpoints(resumed):
  """model.ckpt-6, saved as the session starts, is the restored state: the
  weights as saved, the Keras velocity v as our accumulator -v / lr."""
  _, folder, last, config, _ = resumed
  ours = tf.train.load_checkpoint(os.path.join(
      folder, 'model.ckpt-%d' % TF2_STEPS[-1]))
  theirs = tf.train.load_checkpoint(last)
  names = {tiny_tf2_ssd.without_depth(fact.keras_name): fact.key
           for fact in tf2_checkpoints.facts(tiny_tf2_ssd.CONFIG)}
  assert ours.get_tensor('global_step') == TF2_STEPS[-1]
  rate = _learning_rate(config, TF2_STEPS[-1])
  compared = slots = 0
  for name, shape in ours.get_variable_to_shape_map().items():
    key = names.get(tiny_tf2_ssd.without_depth(name))
    if key is None or not shape:
      continue
    np.testing.assert_array_equal(ours.get_tensor(name),
                                  theirs.get_tensor(key), err_msg=name)
    compared += 1
    if not ours.has_tensor(name + '/Momentum'):
      continue  # Not trained (batch norm statistics).
    velocity = key.replace('/.ATTRIBUTES/', SLOT_MARK + '.ATTRIBUTES/')
    np.testing.assert_allclose(
        ours.get_tensor(name + '/Momentum'), -theirs.get_tensor(velocity) /
        rate, rtol=1e-5, err_msg=name)
    slots += 1
  assert compared > 100 and slots > 50
  assert {BOX_BIAS, CLASS_BIAS} <= set(ours.get_variable_to_shape_map())


def test_a_folder_of_another_model_is_one_line(resumed, tmp_path):
  _, _, _, config, _ = resumed
  ours = tiny_tf2_ssd.model_shapes(config)
  # Two more classes: 6 outputs per anchor, not 4.
  shapes = {name: shape[:-1] + [shape[-1] * 6 // 4]
            if 'ClassPredictor' in name else shape
            for name, shape in ours.items()}
  folder = str(tmp_path / 'other')
  last = tiny_tf2_ssd.write_training_folder(folder, config, TF2_STEPS,
                                            shapes=shapes)
  before = file_trees.snapshot(folder)
  result = run_command('model_main_tf2', [
      '--pipeline_config_path=%s' % config, '--model_dir=%s' % folder])
  assert result.returncode != 0
  line = result.stderr.strip().splitlines()[-1]
  assert "a checkpoint of the original TF2 trainer (model_main_tf2.py)" in line
  assert 'another shape (checkpoint vs model) for 12' in line
  assert '%s %s vs %s' % (CLASS_BIAS, shapes[CLASS_BIAS],
                          ours[CLASS_BIAS]) in line
  assert ('fine_tune_checkpoint: "%s" fine_tune_checkpoint_type: "full"'
          % last) in line
  assert 'did num_classes' not in line
  assert file_trees.snapshot(folder) == before


@pytest.mark.parametrize('facts_name, ours', [
    ('momentum', tf.compat.v1.train.MomentumOptimizer),
    ('adam', tf.compat.v1.train.AdamOptimizer),
    ('rms_prop', tf.compat.v1.train.RMSPropOptimizer),
])
def test_the_slots_mapped_are_those_the_original_saves(facts_name, ours):
  """Each Keras slot name we read is one the original's ckpt-N holds
  (tests/data/tf2_optimizer_slots), with its step count and `step`."""
  keys = [line.split('\t')[0] for line in open(os.path.join(
      os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'data',
      'tf2_optimizer_slots', facts_name + '.txt'))]
  saved = {key.split('/.OPTIMIZER_SLOT/optimizer/')[1].split('/')[0]
           for key in keys if '/.OPTIMIZER_SLOT/' in key}
  assert saved == set(object_based_resume.KERAS_SLOTS[ours].values())
  for value in 'step', 'optimizer/iter':
    assert value + '/.ATTRIBUTES/VARIABLE_VALUE' in keys
