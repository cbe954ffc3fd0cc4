"""Learning rate schedules as graph ops of the global step.

Every schedule returns a scalar float32 tensor named `learning_rate`. Choices
between phases (burn-in, warmup, hold, decay) are made with `tf.where` on the
step tensor, never with Python `if` on tensors, so the graph is static and
compiles for TPU; only the configuration numbers are checked in Python.
"""
import math
import numbers

import tensorflow as tf


def _step_as_float(global_step):
  return tf.cast(global_step, tf.float32)


def _step_as_int(global_step):
  # int64 keeps very long runs exact; the comparisons below use this dtype.
  return tf.cast(global_step, tf.int64)


def exponential_decay_with_burnin(global_step,
                                  learning_rate_base,
                                  learning_rate_decay_steps,
                                  learning_rate_decay_factor,
                                  burnin_learning_rate=0.0,
                                  burnin_steps=0,
                                  min_learning_rate=0.0,
                                  staircase=True):
  """Constant burn-in rate, then exponential decay, floored at a minimum.

  For `step < burnin_steps` the rate is `burnin_learning_rate`; afterwards it
  is `learning_rate_base * learning_rate_decay_factor ** p` with
  `p = (step - burnin_steps) / learning_rate_decay_steps` (floored when
  `staircase`). The result is never below `min_learning_rate`.

  Args:
    global_step: scalar int tensor, the training step.
    learning_rate_base: rate at the end of burn-in, before any decay.
    learning_rate_decay_steps: steps per decay by `learning_rate_decay_factor`
      (counted from the end of burn-in).
    learning_rate_decay_factor: multiplicative decay per
      `learning_rate_decay_steps`.
    burnin_learning_rate: rate during burn-in; 0 means `learning_rate_base`.
    burnin_steps: length of the burn-in phase in steps.
    min_learning_rate: lower bound of the returned rate.
    staircase: decay in discrete jumps instead of continuously.

  Returns:
    Scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: if `learning_rate_decay_steps` is not positive.
  """
  if learning_rate_decay_steps <= 0:
    raise ValueError('learning_rate_decay_steps must be positive, got %r.'
                     % learning_rate_decay_steps)
  if burnin_learning_rate == 0:
    burnin_learning_rate = learning_rate_base
  step = _step_as_int(global_step)
  # Subtract in integers first, as the original does, then go to float.
  exponent = (tf.cast(step - burnin_steps, tf.float32) /
              float(learning_rate_decay_steps))
  if staircase:
    exponent = tf.floor(exponent)
  decayed = learning_rate_base * tf.pow(
      tf.constant(learning_rate_decay_factor, tf.float32), exponent)
  rate = tf.where(step < burnin_steps,
                  tf.constant(burnin_learning_rate, tf.float32), decayed)
  return tf.maximum(rate, tf.constant(min_learning_rate, tf.float32),
                    name='learning_rate')


def cosine_decay_with_warmup(global_step,
                             learning_rate_base,
                             total_steps,
                             warmup_learning_rate=0.0,
                             warmup_steps=0,
                             hold_base_rate_steps=0):
  """Linear warmup, optional hold at the base rate, then cosine decay to 0.

  Phases by step:
    step < warmup_steps: linear from `warmup_learning_rate` (step 0) towards
      `learning_rate_base` (reached at step `warmup_steps`).
    warmup_steps <= step <= warmup_steps + hold_base_rate_steps (only when
      holding): `learning_rate_base`.
    otherwise up to `total_steps`:
      0.5 * base * (1 + cos(pi * (step - warmup - hold) /
                                 (total - warmup - hold))).
    step > total_steps: 0.

  Args:
    global_step: scalar int tensor, the training step.
    learning_rate_base: peak learning rate.
    total_steps: step at which the rate reaches 0.
    warmup_learning_rate: rate at step 0 of the warmup.
    warmup_steps: number of warmup steps (0: no warmup).
    hold_base_rate_steps: steps to stay at the base rate after warmup.

  Returns:
    Scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: if `total_steps < warmup_steps`, or if there is a warmup and
      `warmup_learning_rate > learning_rate_base`.
  """
  if total_steps < warmup_steps:
    raise ValueError('total_steps must be larger or equal to warmup_steps, '
                     'got total_steps=%r, warmup_steps=%r.'
                     % (total_steps, warmup_steps))
  if warmup_steps > 0 and learning_rate_base < warmup_learning_rate:
    raise ValueError('learning_rate_base must be larger or equal to '
                     'warmup_learning_rate, got %r < %r.'
                     % (learning_rate_base, warmup_learning_rate))
  step_int = _step_as_int(global_step)
  step = _step_as_float(global_step)
  decay_start = warmup_steps + hold_base_rate_steps
  # When the decay phase is empty the cosine branch is never selected (the
  # hold or the final zero covers every step); a unit length only avoids a
  # division by zero in the unused branch.
  decay_length = float(total_steps - decay_start) or 1.0
  rate = 0.5 * learning_rate_base * (
      1.0 + tf.cos(math.pi * (step - decay_start) / decay_length))
  if hold_base_rate_steps > 0:
    rate = tf.where(step_int > decay_start, rate,
                    tf.constant(learning_rate_base, tf.float32))
  if warmup_steps > 0:
    slope = (learning_rate_base - warmup_learning_rate) / warmup_steps
    warmup_rate = slope * step + warmup_learning_rate
    rate = tf.where(step_int < warmup_steps, warmup_rate, rate)
  return tf.where(step_int > total_steps, tf.constant(0.0, tf.float32), rate,
                  name='learning_rate')


def manual_stepping(global_step, boundaries, rates, warmup=False):
  """Piecewise-constant rate switching at given steps.

  With boundaries [5, 10] and rates [.1, .01, .001] the rate is .1 for steps
  0..4, .01 for 5..9 and .001 from 10 on. A first boundary of 0, as in
  `schedule { step: 0 ... }` of older model-zoo configs, makes rates[1] the
  rate from step 0 (rates[0] is never used). With `warmup`, steps below
  `boundaries[0]` instead go linearly from `rates[0]` (step 0) towards
  `rates[1]` (reached at `boundaries[0]`).

  Args:
    global_step: scalar int tensor, the training step.
    boundaries: strictly increasing non-negative ints, the steps where the
      rate changes.
    rates: floats, one more than `boundaries`.
    warmup: interpolate linearly over [0, boundaries[0]].

  Returns:
    Scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: if boundaries are not strictly increasing non-negative
      integers (positive with warmup), rates are not numbers, or
      `len(rates) != len(boundaries) + 1`.
  """
  boundaries = list(boundaries)
  rates = list(rates)
  if any(not isinstance(b, numbers.Integral) or isinstance(b, bool) or b < 0
         for b in boundaries):
    raise ValueError('boundaries must be non-negative integers, got %r.' %
                     (boundaries,))
  if warmup and boundaries and boundaries[0] == 0:
    raise ValueError('With warmup the first boundary cannot be zero (it is '
                     'the warmup length), got %r.' % (boundaries,))
  if any(later <= earlier
         for earlier, later in zip(boundaries[:-1], boundaries[1:])):
    raise ValueError('Entries in boundaries must be strictly increasing, '
                     'got %r.' % (boundaries,))
  if any(not isinstance(r, numbers.Real) or isinstance(r, bool)
         for r in rates):
    raise ValueError('Learning rates must be floats, got %r.' % (rates,))
  if len(rates) != len(boundaries) + 1:
    raise ValueError('Number of learning rates (%d) must be the number of '
                     'boundaries (%d) plus one.'
                     % (len(rates), len(boundaries)))

  step_int = _step_as_int(global_step)
  rate_table = tf.constant(rates, tf.float32)
  if boundaries:
    # Index of the interval = number of boundaries already passed; a fixed
    # size reduction, so no data-dependent control flow.
    passed = tf.cast(step_int >= tf.constant(boundaries, tf.int64), tf.int32)
    rate = tf.gather(rate_table, tf.reduce_sum(passed))
  else:
    rate = rate_table[0]
  if warmup and boundaries:
    # Same values as a table with one entry per warmup step, without building
    # a table as long as the warmup.
    slope = (rates[1] - rates[0]) / float(boundaries[0])
    warmup_rate = rates[0] + slope * _step_as_float(
        tf.maximum(step_int, 0))
    rate = tf.where(step_int < boundaries[0], warmup_rate, rate)
  return tf.identity(rate, name='learning_rate')
