"""train_config.freeze_variables and update_trainable_variables, end to end.

Two training steps of the tiny SSD; the checkpoints at step 0 and step 2
show which weights the optimizer changed. As in the original (tf-slim's
filter_variables): update_trainable_variables lists the only variables
trained, freeze_variables those not trained (applied after the update
list), and a regex matches anywhere in a variable's name.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import model_lib
from od_estimator.estimator import training_graph
from od_estimator.protos import train_pb2
from od_estimator.config import config_util
from tests import tiny_ssd

FEATURE = 'FeatureExtractor/MobilenetV1/Conv2d_0/weights'
BOX = 'BoxPredictor_0/BoxEncodingPredictor/weights'
CLASS = 'BoxPredictor_0/ClassPredictor/weights'


@pytest.fixture(scope='module')
def config(tmp_path_factory):
  directory = tmp_path_factory.mktemp('freeze')
  return tiny_ssd.write_config(directory, directory / 'data')


def _changed(config, model_dir, train_config_text):
  """Trains 2 steps; returns {variable: whether its value changed}."""
  hparams = config_util.parse_hparams_overrides(tiny_ssd.LIGHT_OVERRIDES)
  run_config = tiny_ssd.run_config(model_dir)
  parts = model_lib.create_estimator_and_inputs(
      run_config, hparams=hparams, pipeline_config_path=config,
      config_override='train_config { %s }' % train_config_text)
  parts['estimator'].train(parts['train_input_fn'], max_steps=2)
  before = tf.train.load_checkpoint(str(model_dir / 'model.ckpt-0'))
  after = tf.train.load_checkpoint(str(model_dir / 'model.ckpt-2'))
  return {name: not np.array_equal(before.get_tensor(name),
                                   after.get_tensor(name))
          for name in (FEATURE, BOX, CLASS)}


def test_freeze_variables_are_not_trained_and_match_anywhere(config,
                                                             tmp_path):
  # 'ClassPredictor' starts nowhere in a name: only re.search finds it.
  changed = _changed(config, tmp_path,
                     'freeze_variables: "ClassPredictor"')
  assert changed == {FEATURE: True, BOX: True, CLASS: False}


def test_update_trainable_variables_then_freeze_variables(config, tmp_path):
  changed = _changed(config, tmp_path,
                     'update_trainable_variables: "BoxPredictor" '
                     'freeze_variables: "ClassPredictor"')
  assert changed == {FEATURE: False, BOX: True, CLASS: False}


def test_nothing_left_to_train_is_a_user_error():
  train_config = train_pb2.TrainConfig(
      update_trainable_variables=['BoxPredictor'],
      freeze_variables=['Predictor'])
  with tf.Graph().as_default():
    tf.compat.v1.get_variable('BoxPredictor_0/ClassPredictor/weights', [1])
    with pytest.raises(errors.UserInputError,
                       match='freeze_variables .*Predictor'):
      training_graph.trainable_variables(train_config)
