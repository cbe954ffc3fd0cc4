"""optimizer_builder: optimizers and schedules from sample-style text protos."""

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator.builders import optimizer_builder
from od_estimator.protos import optimizer_pb2


def _config(text):
  return text_format.Merge(text, optimizer_pb2.Optimizer())


@pytest.fixture
def graph():
  with tf.Graph().as_default() as g:
    yield g


def _rate_at(rate, global_step, step):
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    global_step.load(step, sess)
    return sess.run(rate)


def test_momentum_cosine(graph):
  del graph
  config = _config("""
    momentum_optimizer: {
      learning_rate: {
        cosine_decay_learning_rate {
          learning_rate_base: .04
          total_steps: 1000
          warmup_learning_rate: .01
          warmup_steps: 100
        }
      }
      momentum_optimizer_value: 0.9
    }
    use_moving_average: false
  """)
  optimizer, summary_vars = optimizer_builder.build(config)
  assert type(optimizer) is tf.compat.v1.train.MomentumOptimizer
  assert optimizer._momentum == pytest.approx(0.9)
  [rate] = summary_vars
  assert optimizer._learning_rate is rate
  assert rate.op.name == 'learning_rate'
  global_step = tf.compat.v1.train.get_global_step()
  assert global_step is not None  # created by the builder
  # Warmup: 0.01 + (0.04 - 0.01) * 50 / 100 = 0.025.
  assert _rate_at(rate, global_step, 50) == pytest.approx(0.025)
  # Half way through the decay (100 + 450): 0.5 * 0.04 * (1 + cos(pi/2)).
  assert _rate_at(rate, global_step, 550) == pytest.approx(0.02)


def test_rms_prop_exponential(graph):
  del graph
  config = _config("""
    rms_prop_optimizer: {
      learning_rate: {
        exponential_decay_learning_rate {
          initial_learning_rate: 0.004
          decay_steps: 800720
          decay_factor: 0.95
        }
      }
      momentum_optimizer_value: 0.8
      decay: 0.7
      epsilon: 1.0
    }
    use_moving_average: false
  """)
  global_step = tf.Variable(0, dtype=tf.int64, name='my_step')
  optimizer, [rate] = optimizer_builder.build(config, global_step=global_step)
  assert type(optimizer) is tf.compat.v1.train.RMSPropOptimizer
  assert optimizer._decay == pytest.approx(0.7)
  assert optimizer._momentum == pytest.approx(0.8)
  assert optimizer._epsilon == pytest.approx(1.0)
  assert rate.op.name == 'learning_rate'
  # The given step drives the rate; no default global step is made.
  assert tf.compat.v1.train.get_global_step() is None
  assert _rate_at(rate, global_step, 0) == pytest.approx(0.004)
  # Staircase (default true): 0.004 * 0.95 ** floor(1601440 / 800720).
  assert _rate_at(rate, global_step, 1601440) == pytest.approx(
      0.004 * 0.95 ** 2)


def test_adam_manual_step(graph):
  del graph
  config = _config("""
    adam_optimizer: {
      learning_rate: {
        manual_step_learning_rate {
          initial_learning_rate: 0.0002
          schedule { step: 900000 learning_rate: .00002 }
          schedule { step: 1200000 learning_rate: .000002 }
        }
      }
    }
    use_moving_average: false
  """)
  optimizer, [rate] = optimizer_builder.build(config)
  assert type(optimizer) is tf.compat.v1.train.AdamOptimizer
  assert optimizer._epsilon == pytest.approx(1e-8)  # proto default
  assert rate.op.name == 'learning_rate'
  global_step = tf.compat.v1.train.get_global_step()
  assert _rate_at(rate, global_step, 899999) == pytest.approx(0.0002)
  assert _rate_at(rate, global_step, 900000) == pytest.approx(0.00002)
  assert _rate_at(rate, global_step, 1200000) == pytest.approx(0.000002)


def test_manual_step_warmup_and_constant(graph):
  del graph
  config = _config("""
    momentum_optimizer: {
      learning_rate: {
        manual_step_learning_rate {
          initial_learning_rate: 0.0
          schedule { step: 10 learning_rate: 0.1 }
          warmup: true
        }
      }
    }
    use_moving_average: false
  """)
  _, [rate] = optimizer_builder.build(config)
  # Warmup from 0 to 0.1 over 10 steps: step 3 -> 0.03.
  assert _rate_at(rate, tf.compat.v1.train.get_global_step(),
                  3) == pytest.approx(0.03)
  constant = _config("""
    momentum_optimizer: {
      learning_rate: { constant_learning_rate { learning_rate: 0.004 } }
    }
    use_moving_average: false
  """)
  with tf.name_scope('second'):
    _, [rate] = optimizer_builder.build(constant)
  assert rate.op.name == 'second/learning_rate'
  with tf.compat.v1.Session() as sess:
    assert sess.run(rate) == pytest.approx(0.004)


def test_errors(graph):
  del graph
  with pytest.raises(ValueError, match='Optimizer.optimizer'):
    optimizer_builder.build(_config('use_moving_average: false'))
  with pytest.raises(ValueError,
                     match='Optimizer.adam_optimizer.learning_rate'):
    optimizer_builder.build(_config('adam_optimizer {}'))
  with pytest.raises(ValueError, match='schedule'):
    optimizer_builder.build(_config("""
      momentum_optimizer {
        learning_rate { manual_step_learning_rate { } }
      }
    """))
  with pytest.raises(ValueError, match='total_steps'):
    optimizer_builder.build(_config("""
      momentum_optimizer { learning_rate { cosine_decay_learning_rate {
        total_steps: 10 warmup_steps: 20 } } }
    """))
  with pytest.raises(ValueError, match='optimizer_pb2.Optimizer'):
    optimizer_builder.build(optimizer_pb2.LearningRate())


_EMA_CONFIG = """
  momentum_optimizer: {
    learning_rate: { constant_learning_rate { learning_rate: 0.1 } }
    momentum_optimizer_value: 0.0
  }
  use_moving_average: true
  moving_average_decay: 0.5
"""


def _train_graph():
  """w (init 1) and frozen f (init 5); loss = 2w + f, so dloss/dw = 2."""
  optimizer, _ = optimizer_builder.build(_config(_EMA_CONFIG))
  w = tf.compat.v1.get_variable('model/w', initializer=tf.constant(1.0))
  f = tf.compat.v1.get_variable('model/frozen', initializer=tf.constant(5.0))
  loss = 2.0 * w + f
  global_step = tf.compat.v1.train.get_global_step()
  train_op = optimizer.minimize(loss, global_step=global_step, var_list=[w])
  return optimizer, w, f, train_op, global_step


def test_default_moving_average():
  config = _config("""
    adam_optimizer: {
      learning_rate: { constant_learning_rate { learning_rate: 0.1 } }
    }
  """)
  with tf.Graph().as_default():
    optimizer, _ = optimizer_builder.build(config)
  # use_moving_average defaults to true, decay 0.9999.
  assert isinstance(optimizer, optimizer_builder.MovingAverageOptimizer)
  assert isinstance(optimizer, tf.compat.v1.train.Optimizer)
  assert type(optimizer.optimizer) is tf.compat.v1.train.AdamOptimizer
  assert optimizer.average_decay == pytest.approx(0.9999)


def test_moving_average_updates(graph):
  del graph
  optimizer, w, _, train_op, global_step = _train_graph()
  assert optimizer.average_decay == pytest.approx(0.5)
  names = sorted(v.op.name for v in tf.compat.v1.global_variables())
  assert 'model/w/ExponentialMovingAverage' in names
  # Only variables that are trained get an average.
  assert 'model/frozen/ExponentialMovingAverage' not in names
  [average] = [v for v in tf.compat.v1.global_variables()
               if v.op.name == 'model/w/ExponentialMovingAverage']
  assert optimizer.ema.average(w) is average
  assert not any(v.op.name.endswith('ExponentialMovingAverage')
                 for v in tf.compat.v1.trainable_variables())
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    assert sess.run(average) == pytest.approx(1.0)  # starts at w's init
    sess.run(train_op)
    # w = 1 - 0.1 * 2 = 0.8; average = 0.5 * 1 + 0.5 * 0.8 = 0.9.
    assert sess.run([w, average, global_step]) == pytest.approx(
        [0.8, 0.9, 1])
    sess.run(train_op)
    # w = 0.8 - 0.2 = 0.6; average = 0.5 * 0.9 + 0.5 * 0.6 = 0.75.
    assert sess.run([w, average, global_step]) == pytest.approx(
        [0.6, 0.75, 2])


def _train_and_save(tmp_path, swapping):
  with tf.Graph().as_default():
    optimizer, _, _, train_op, _ = _train_graph()
    saver = (optimizer.swapping_saver() if swapping
             else tf.compat.v1.train.Saver())
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(train_op)
      sess.run(train_op)
      return saver.save(sess, str(tmp_path / 'model.ckpt'))


def test_swapping_saver(tmp_path):
  path = _train_and_save(tmp_path, swapping=True)
  reader = tf.compat.v1.train.NewCheckpointReader(path)
  # After two steps w = 0.6 and its average 0.75 (see above); they are
  # saved under each other's names.
  assert reader.get_tensor('model/w') == pytest.approx(0.75)
  assert reader.get_tensor('model/w/ExponentialMovingAverage') == (
      pytest.approx(0.6))
  assert reader.get_tensor('model/frozen') == pytest.approx(5.0)
  assert reader.get_tensor('global_step') == 2


def test_variables_to_restore_for_eval(tmp_path):
  path = _train_and_save(tmp_path, swapping=False)
  # Eval graph: same model variables, no optimizer.
  with tf.Graph().as_default():
    w = tf.compat.v1.get_variable('model/w', initializer=tf.constant(0.0))
    f = tf.compat.v1.get_variable('model/frozen',
                                  initializer=tf.constant(0.0))
    # Without a checkpoint every trainable variable maps to its average.
    assert optimizer_builder.moving_average_variables_to_restore() == {
        'model/w/ExponentialMovingAverage': w,
        'model/frozen/ExponentialMovingAverage': f}
    # With it, the never-averaged frozen variable falls back to its name.
    var_map = optimizer_builder.moving_average_variables_to_restore(
        checkpoint_path=path)
    assert var_map == {'model/w/ExponentialMovingAverage': w,
                       'model/frozen': f}
    with tf.compat.v1.Session() as sess:
      tf.compat.v1.train.Saver(var_map).restore(sess, path)
      assert sess.run([w, f]) == pytest.approx([0.75, 5.0])


def test_optimizer_variables_to_restore(graph):
  del graph
  optimizer, w, f, _, global_step = _train_graph()
  var_map = optimizer.variables_to_restore()
  assert var_map['model/w/ExponentialMovingAverage'] is w
  assert var_map['model/frozen'] is f
  assert var_map['global_step'] is global_step
  assert 'model/w' not in var_map


def test_swapping_saver_before_training(graph):
  del graph
  optimizer, _ = optimizer_builder.build(_config(_EMA_CONFIG))
  with pytest.raises(RuntimeError, match='apply_gradients'):
    optimizer.swapping_saver()


def test_moving_average_with_sparse_and_none_gradients(graph):
  del graph
  optimizer, _ = optimizer_builder.build(_config(_EMA_CONFIG))
  table = tf.compat.v1.get_variable(
      'table', initializer=tf.constant(np.ones([3, 2], np.float32)))
  unused = tf.compat.v1.get_variable('unused', initializer=tf.constant(1.0))
  loss = tf.reduce_sum(tf.gather(table, [1]))
  grads_and_vars = optimizer.compute_gradients(loss, [table, unused])
  assert grads_and_vars[1][0] is None
  train_op = optimizer.apply_gradients(grads_and_vars)
  average = optimizer.ema.average(table)
  assert optimizer.ema.average(unused) is None
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(train_op)
    # Row 1 becomes 1 - 0.1 = 0.9; its average 0.5 * 1 + 0.5 * 0.9.
    np.testing.assert_allclose(sess.run(average),
                               [[1., 1.], [0.95, 0.95], [1., 1.]])
