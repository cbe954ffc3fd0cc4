"""train_config.freeze_variables and update_trainable_variables, end to end;
train_config.use_bfloat16 off TPU in the same run.

Two training steps of the tiniest model (tiny_faster_rcnn's config with the
fake 1x1-conv extractor: the variable filters do not depend on the
network); the checkpoints at step 0 and step 2 show which weights the
optimizer changed. As in the original (tf-slim's
filter_variables): update_trainable_variables lists the only variables
trained, freeze_variables those not trained (applied after the update
list), and a regex matches anywhere in a variable's name.

Off TPU use_bfloat16 builds the same float32 input pipeline and model
(bfloat16 is a session rewrite there, tests/estimator/test_cpu_bfloat16.py)
with one note; the freeze_variables run has it set (the tests' sessions run
without grappler, so it trains float32) and its test checks the note.
"""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import model_lib
from od_estimator.estimator import training_graph
from od_estimator.protos import train_pb2
from tests import log_capture
from tests import tiny_faster_rcnn
from tests import tiny_ssd

FEATURE = 'FirstStageFeatureExtractor/layer1/weights'
# The RPN's heads: each image's best-matching anchors are positives, so
# both losses reach them from the first step.
BOX = 'FirstStageBoxPredictor/BoxEncodingPredictor/weights'
CLASS = 'FirstStageBoxPredictor/ClassPredictor/weights'


pytestmark = pytest.mark.usefixtures('fake_extractor')


@pytest.fixture(scope='module')
def config(tmp_path_factory):
  directory = tmp_path_factory.mktemp('freeze')
  return tiny_faster_rcnn.write_config(directory, directory / 'data',
                                       extractor='fake')


def _train(config, model_dir, train_config_text, use_bfloat16=False):
  """Trains 2 steps.

  Returns:
    {'changed': {variable: whether its value changed}, 'losses': each
    step's total loss, 'messages': what was logged through absl,
    'configs': the configs trained}.
  """
  hparams = {'use_bfloat16': True} if use_bfloat16 else None
  losses = []
  with log_capture.absl_messages() as messages:
    parts = model_lib.create_estimator_and_inputs(
        tiny_ssd.run_config(model_dir), hparams=hparams,
        pipeline_config_path=config,
        config_override='train_config { %s }' % train_config_text)
    parts['estimator'].train(
        parts['train_input_fn'], max_steps=2,
        hooks=[tf.compat.v1.train.LoggingTensorHook(
            {'loss': 'total_loss:0'}, every_n_iter=1,
            formatter=lambda values: losses.append(values['loss']) or '')])
  before = tf.train.load_checkpoint(str(model_dir / 'model.ckpt-0'))
  after = tf.train.load_checkpoint(str(model_dir / 'model.ckpt-2'))
  return {'changed': {name: not np.array_equal(before.get_tensor(name),
                                               after.get_tensor(name))
                      for name in (FEATURE, BOX, CLASS)},
          'losses': losses, 'messages': messages,
          'configs': parts['configs']}


@pytest.fixture(scope='module')
def freeze_run(config, tmp_path_factory):
  """freeze_variables "ClassPredictor", with use_bfloat16 set."""
  return _train(config, tmp_path_factory.mktemp('freeze_run'),
                'freeze_variables: "ClassPredictor"', use_bfloat16=True)


def test_freeze_variables_are_not_trained_and_match_anywhere(freeze_run):
  # 'ClassPredictor' starts nowhere in a name: only re.search finds it.
  assert freeze_run['changed'] == {FEATURE: True, BOX: True, CLASS: False}


def test_use_bfloat16_trains_on_cpu_with_one_note(freeze_run):
  assert freeze_run['configs']['train_config'].use_bfloat16
  losses = freeze_run['losses']
  assert len(losses) == 2 and np.isfinite(losses).all(), losses
  notes = [m for m in freeze_run['messages'] if m.startswith('bfloat16')]
  assert len(notes) == 1, freeze_run['messages']


def test_update_trainable_variables_then_freeze_variables(config, tmp_path):
  changed = _train(config, tmp_path,
                   'update_trainable_variables: "BoxPredictor" '
                   'freeze_variables: "ClassPredictor"')['changed']
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
