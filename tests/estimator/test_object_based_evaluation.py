"""object_based_evaluation: what a TF2 ckpt-N gives the evaluation graph.

A two-variable graph (a Keras-named kernel and global_step) against small
object-based checkpoints in the original's layout.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import object_based_evaluation
from od_estimator.utils import object_checkpoint_writer

_KERNEL = 'Conv1/kernel'
_ENTRY = object_checkpoint_writer.Entry(
    'model/_feature_extractor/classification_backbone/layer_with_weights-0/'
    'kernel', _KERNEL, np.ones([2, 3], np.float32))
_STEP = object_checkpoint_writer.Entry('step', 'global_step',
                                       np.int64(40))
_ITER = object_checkpoint_writer.Entry('optimizer/iter', 'SGD/iter',
                                       np.int64(41))


def _restored(prefix, shape=(2, 3)):
  """{variable name: value} the evaluation's Saver restores from prefix."""
  with tf.Graph().as_default():
    tf.compat.v1.get_variable(_KERNEL, shape)
    tf.compat.v1.train.get_or_create_global_step()
    keys = object_based_evaluation.restored_variables(
        prefix, False, 'DIR', 'CONFIG')
    with tf.compat.v1.Session() as session:
      tf.compat.v1.train.Saver(keys).restore(session, prefix)
      return session.run({variable.op.name: variable
                          for variable in keys.values()})


@pytest.mark.parametrize('entries, step', [
    ([_ENTRY, _STEP, _ITER], 40),
    # Without `step`, the optimizer's iterations.
    ([_ENTRY, _ITER], 41),
])
def test_the_model_and_its_step_are_restored(tmp_path, entries, step):
  prefix = object_checkpoint_writer.write(str(tmp_path / 'ckpt-1'), entries)
  restored = _restored(prefix)
  np.testing.assert_array_equal(restored[_KERNEL], _ENTRY.value)
  assert restored['global_step'] == step


@pytest.mark.parametrize('entries, shape, message', [
    ([_STEP], (2, 3), ': no value for Conv1/kernel (a value is found by the '
     'variable name its object graph records)'),
    ([_ENTRY], (2, 3), ': it holds the model alone, no training step'),
    ([_ENTRY, _STEP], (4, 3), ': shape differs for model/_feature_extractor/'
     'classification_backbone/layer_with_weights-0/kernel/.ATTRIBUTES/'
     'VARIABLE_VALUE (graph [4, 3], checkpoint [2, 3])'),
])
def test_a_checkpoint_that_does_not_fit_names_the_first_value(
    tmp_path, entries, shape, message):
  prefix = object_checkpoint_writer.write(str(tmp_path / 'ckpt-1'), entries)
  with pytest.raises(errors.UserInputError) as raised:
    _restored(prefix, shape)
  assert str(raised.value).startswith(
      '--checkpoint_dir=DIR: ckpt-1 (TF2, object-based) does not fit the '
      'model of --pipeline_config_path=CONFIG' + message)
