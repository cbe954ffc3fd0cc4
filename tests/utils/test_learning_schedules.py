"""learning_schedules: values at chosen steps, computed by hand."""
import math

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.utils import learning_schedules


def _rates(schedule_fn, steps):
  """Evaluates schedule_fn(step_tensor) for each step in one graph."""
  with tf.Graph().as_default():
    step = tf.compat.v1.placeholder(tf.int64, shape=[])
    rate = schedule_fn(step)
    assert rate.op.name.endswith('learning_rate')
    assert rate.shape.as_list() == []
    assert rate.dtype == tf.float32
    with tf.compat.v1.Session() as sess:
      return np.array([sess.run(rate, {step: s}) for s in steps])


def test_exponential_decay_burnin_staircase_and_min():
  # base 1.0, decay x0.1 every 3 steps counted after a 2-step burn-in at 0.5,
  # floor 0.05. Steps 2..4: 1.0 * 0.1**floor(0..2 / 3) = 1.0;
  # 5..7: 0.1**1 = 0.1; 8: 0.1**2 = 0.01 -> floored to 0.05.
  rates = _rates(
      lambda s: learning_schedules.exponential_decay_with_burnin(
          s, 1.0, 3, 0.1, burnin_learning_rate=0.5, burnin_steps=2,
          min_learning_rate=0.05),
      range(9))
  np.testing.assert_allclose(
      rates, [.5, .5, 1., 1., 1., .1, .1, .1, .05], rtol=1e-5)


def test_exponential_decay_zero_burnin_rate_means_base():
  # burnin_learning_rate 0 -> the base rate during burn-in.
  rates = _rates(
      lambda s: learning_schedules.exponential_decay_with_burnin(
          s, 0.2, 10, 0.5, burnin_learning_rate=0.0, burnin_steps=5),
      [0, 4, 5, 15])
  # Step 15: 0.2 * 0.5**floor((15-5)/10) = 0.1.
  np.testing.assert_allclose(rates, [0.2, 0.2, 0.2, 0.1], rtol=1e-6)


def test_exponential_decay_continuous():
  # staircase False: 0.2 * 0.5**(5/10) = 0.2 / sqrt(2); 0.2 * 0.5**1.5.
  rates = _rates(
      lambda s: learning_schedules.exponential_decay_with_burnin(
          s, 0.2, 10, 0.5, staircase=False),
      [0, 5, 15])
  np.testing.assert_allclose(
      rates, [0.2, 0.2 / math.sqrt(2.0), 0.2 * 0.5 ** 1.5], rtol=1e-6)


def test_exponential_decay_int32_step():
  with tf.Graph().as_default():
    rate = learning_schedules.exponential_decay_with_burnin(
        tf.constant(20, tf.int32), 1.0, 10, 0.5)
    with tf.compat.v1.Session() as sess:
      assert sess.run(rate) == pytest.approx(0.25)  # 0.5**2


def test_exponential_decay_bad_decay_steps():
  with tf.Graph().as_default(), pytest.raises(ValueError, match='decay_steps'):
    learning_schedules.exponential_decay_with_burnin(
        tf.constant(0, tf.int64), 1.0, 0, 0.5)


def test_cosine_warmup_then_decay():
  base, total, warm_lr, warm = 0.04, 1000, 0.01, 100
  rates = _rates(
      lambda s: learning_schedules.cosine_decay_with_warmup(
          s, base, total, warm_lr, warm),
      [0, 50, 99, 100, 550, 1000, 1001])
  expected = [
      0.01,                                # warmup start
      0.01 + (0.04 - 0.01) * 50 / 100,     # 0.025
      0.01 + (0.04 - 0.01) * 99 / 100,     # 0.0397
      0.04,                                # cos(0) = 1: the base rate
      0.5 * 0.04 * (1 + math.cos(math.pi * 450 / 900)),  # cos(pi/2)=0: 0.02
      0.0,                                 # cos(pi) = -1
      0.0,                                 # past total_steps
  ]
  np.testing.assert_allclose(rates, expected, rtol=1e-5, atol=1e-7)


def test_cosine_with_hold():
  # warmup 9 steps from 0.1 to 1.0, hold until step 29, decay to 120.
  rates = _rates(
      lambda s: learning_schedules.cosine_decay_with_warmup(
          s, 1.0, 120, 0.1, 9, hold_base_rate_steps=20),
      [0, 4, 9, 29, 30, 75, 120, 121])
  expected = [
      0.1,
      0.1 + 0.9 * 4 / 9,                               # 0.5
      1.0,
      1.0,                                             # still holding
      0.5 * (1 + math.cos(math.pi * 1 / 91)),          # first decay step
      0.5 * (1 + math.cos(math.pi * 46 / 91)),
      0.0,
      0.0,
  ]
  np.testing.assert_allclose(rates, expected, rtol=1e-5, atol=1e-7)


def test_cosine_without_warmup():
  # Pure cosine from step 0: quarter way = 0.5 * (1 + cos(pi/4)).
  rates = _rates(
      lambda s: learning_schedules.cosine_decay_with_warmup(s, 2.0, 100),
      [0, 25])
  np.testing.assert_allclose(
      rates, [2.0, 1.0 + math.cos(math.pi / 4)], rtol=1e-6)


def test_cosine_warmup_equals_total():
  # No decay phase: warmup reaches the base at the last step, then 0.
  rates = _rates(
      lambda s: learning_schedules.cosine_decay_with_warmup(
          s, 1.0, 10, 0.0, 10),
      [5, 10, 11])
  np.testing.assert_allclose(rates, [0.5, 1.0, 0.0], rtol=1e-6)


def test_cosine_bad_arguments():
  with tf.Graph().as_default():
    step = tf.constant(0, tf.int64)
    with pytest.raises(ValueError, match='total_steps'):
      learning_schedules.cosine_decay_with_warmup(step, 1.0, 10, 0.1, 20)
    with pytest.raises(ValueError, match='warmup_learning_rate'):
      learning_schedules.cosine_decay_with_warmup(step, 0.1, 100, 0.2, 10)


def test_manual_stepping():
  rates = _rates(
      lambda s: learning_schedules.manual_stepping(
          s, [2, 3, 7], [1.0, 2.0, 3.0, 4.0]),
      range(10))
  np.testing.assert_allclose(
      rates, [1., 1., 2., 3., 3., 3., 3., 4., 4., 4.])


def test_manual_stepping_with_warmup():
  # Steps 0..3 go linearly from 0.02 towards 0.10 (slope 0.02 per step).
  rates = _rates(
      lambda s: learning_schedules.manual_stepping(
          s, [4, 6, 8], [0.02, 0.10, 0.01, 0.001], warmup=True),
      range(10))
  np.testing.assert_allclose(
      rates, [0.02, 0.04, 0.06, 0.08, 0.10, 0.10, 0.01, 0.01, 0.001, 0.001],
      rtol=1e-5)


def test_manual_stepping_no_boundaries():
  rates = _rates(
      lambda s: learning_schedules.manual_stepping(s, [], [0.01],
                                                   warmup=True),
      [0, 5, 1000])
  np.testing.assert_allclose(rates, [0.01] * 3)


def test_manual_stepping_execute_fixture(execute):
  out = execute(
      lambda s: learning_schedules.manual_stepping(s, [5], [0.1, 0.01]),
      [np.array(5, np.int64)])
  assert out == pytest.approx(0.01)


def test_manual_stepping_first_step_zero_starts_with_its_rate():
  # Older model-zoo configs: schedule { step: 0 learning_rate: .0003 } ...
  rates = _rates(
      lambda s: learning_schedules.manual_stepping(
          s, [0, 4, 8], [0.1, 0.0003, 0.00003, 0.000003]),
      [0, 3, 4, 8, 100])
  np.testing.assert_allclose(rates, [3e-4, 3e-4, 3e-5, 3e-6, 3e-6],
                             rtol=1e-5)
  with tf.Graph().as_default(), pytest.raises(ValueError, match='warmup'):
    learning_schedules.manual_stepping(
        tf.constant(0, tf.int64), [0, 5], [1.0, 2.0, 3.0], warmup=True)


@pytest.mark.parametrize('boundaries, rates, match', [
    ([-1, 5], [1.0, 2.0, 3.0], 'non-negative'),
    ([5, 5], [1.0, 2.0, 3.0], 'increasing'),
    ([5, 3], [1.0, 2.0, 3.0], 'increasing'),
    ([2.5], [1.0, 2.0], 'non-negative integers'),
    ([5], ['a', 2.0], 'floats'),
    ([5], [1.0], 'plus one'),
])
def test_manual_stepping_bad_arguments(boundaries, rates, match):
  with tf.Graph().as_default(), pytest.raises(ValueError, match=match):
    learning_schedules.manual_stepping(
        tf.constant(0, tf.int64), boundaries, rates)


def test_schedules_have_no_control_flow():
  # TPU-friendly: phases are chosen with element-wise selects, so the graph
  # holds no Switch/Merge/If ops.
  with tf.Graph().as_default() as graph:
    step = tf.compat.v1.placeholder(tf.int64, shape=[])
    learning_schedules.exponential_decay_with_burnin(
        step, 1.0, 10, 0.5, burnin_learning_rate=0.1, burnin_steps=5,
        min_learning_rate=0.01)
    learning_schedules.cosine_decay_with_warmup(step, 1.0, 100, 0.1, 10, 5)
    learning_schedules.manual_stepping(step, [4, 8], [0.1, 0.2, 0.3],
                                       warmup=True)
  op_types = {op.type for op in graph.get_operations()}
  assert not op_types & {'Switch', 'Merge', 'If', 'StatelessIf', 'While'}
