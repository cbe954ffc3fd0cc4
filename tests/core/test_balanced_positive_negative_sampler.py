"""BalancedPositiveNegativeSampler: counts, fraction, static shapes, XLA."""
import numpy as np
import pytest
import tensorflow as tf

from od_estimator.core import balanced_positive_negative_sampler as sampler_lib
from od_estimator.core import minibatch_sampler

Sampler = sampler_lib.BalancedPositiveNegativeSampler


def _candidates(num, num_positives, num_negatives, seed=0):
  """(indicator, labels): candidates scattered among num entries."""
  rng = np.random.RandomState(seed)
  order = rng.permutation(num)
  indicator = np.zeros(num, bool)
  labels = np.zeros(num, bool)
  positives = order[:num_positives]
  negatives = order[num_positives:num_positives + num_negatives]
  indicator[positives] = indicator[negatives] = True
  labels[positives] = True
  # Some non-candidates labelled positive: they must never be sampled.
  labels[order[num_positives + num_negatives:][::3]] = True
  return indicator, labels


def _expected_counts(indicator, labels, batch_size, fraction):
  """Numpy reference: (positives, negatives) a batch should hold."""
  positives = int(np.sum(indicator & labels))
  negatives = int(np.sum(indicator & ~labels))
  if batch_size is None:
    num_positives = positives
    num_negatives = int((1 - fraction) / fraction * num_positives)
  else:
    num_positives = min(positives, int(batch_size * fraction))
    num_negatives = batch_size - num_positives
  return num_positives, min(negatives, num_negatives)


def _sample(execute, indicator, labels, batch_size, fraction=0.5,
            is_static=False, dynamic=False):
  sampler = Sampler(positive_fraction=fraction, is_static=is_static)
  return execute(lambda i, l: sampler.subsample(i, batch_size, l),
                 [indicator, labels], dynamic=dynamic)


def _check(sampled, indicator, labels, batch_size, fraction):
  num_positives, num_negatives = _expected_counts(indicator, labels,
                                                  batch_size, fraction)
  assert sampled.dtype == bool
  assert not np.any(sampled & ~indicator)
  assert np.sum(sampled & labels) == num_positives
  assert np.sum(sampled & ~labels) == num_negatives


@pytest.mark.parametrize('dynamic', [False, True])
@pytest.mark.parametrize('num_positives,num_negatives,batch_size,fraction', [
    (100, 200, 64, 0.5),    # Enough of both: 32 + 32.
    (100, 200, 64, 0.25),   # The fraction caps positives: 16 + 48.
    (5, 200, 64, 0.5),      # Too few positives: negatives fill up.
    (50, 10, 64, 0.5),      # Too few negatives: a smaller batch.
    (0, 200, 64, 0.5),      # No positives.
    (100, 200, 63, 0.5),    # Odd batch: floor(31.5) positives.
    (30, 200, None, 0.5),   # batch_size None: all positives, as many negs.
    (30, 200, None, 0.25),  # ... three negatives per positive.
    (30, 20, None, 0.25),   # ... as many negatives as there are.
])
def test_counts(execute, num_positives, num_negatives, batch_size, fraction,
                dynamic):
  indicator, labels = _candidates(400, num_positives, num_negatives)
  sampled = _sample(execute, indicator, labels, batch_size, fraction,
                    dynamic=dynamic)
  _check(sampled, indicator, labels, batch_size, fraction)


def test_empty(execute):
  empty = np.zeros(0, bool)
  for is_static in (False, True):
    sampled = _sample(execute, empty, empty, 64, is_static=is_static)
    assert sampled.shape == (0,)
  nothing = np.zeros(10, bool)
  assert not np.any(_sample(execute, nothing, nothing, 4))


@pytest.mark.parametrize('num_positives,num_negatives,batch_size,fraction', [
    (100, 200, 64, 0.25), (5, 200, 64, 0.5), (0, 200, 64, 0.5),
    (100, 200, 63, 0.5)])
def test_static_same_counts_as_dynamic(execute, num_positives, num_negatives,
                                       batch_size, fraction):
  indicator, labels = _candidates(400, num_positives, num_negatives)
  sampled = _sample(execute, indicator, labels, batch_size, fraction,
                    is_static=True)
  _check(sampled, indicator, labels, batch_size, fraction)


def test_static_fills_the_batch_with_non_candidates(execute):
  # 3 positives + 4 negatives < 16: the 9 first non-candidates fill up.
  indicator, labels = _candidates(40, 3, 4)
  sampled = _sample(execute, indicator, labels, 16, is_static=True)
  assert np.sum(sampled) == 16
  assert np.all(sampled[indicator])
  filled = np.flatnonzero(sampled & ~indicator)
  np.testing.assert_array_equal(filled, np.flatnonzero(~indicator)[:9])
  # Fewer entries than the batch size: all of them.
  indicator, labels = _candidates(10, 2, 3)
  assert np.all(_sample(execute, indicator, labels, 16, is_static=True))


def test_static_keeps_static_shapes():
  with tf.Graph().as_default():
    indicator = tf.zeros([300], tf.bool)
    sampled = Sampler(0.25, is_static=True).subsample(indicator, 64,
                                                      indicator)
    assert sampled.shape.as_list() == [300]
    # No op whose output size depends on the data.
    op_types = {op.type for op in tf.compat.v1.get_default_graph()
                .get_operations()}
    assert not op_types & {'Where', 'RandomShuffle', 'Unique', 'BooleanMask'}
    for op in tf.compat.v1.get_default_graph().get_operations():
      for output in op.outputs:
        assert output.shape.is_fully_defined(), (op.name, output.shape)


def test_static_compiles_with_xla():
  indicator, labels = _candidates(300, 40, 200)
  sampler = Sampler(positive_fraction=0.25, is_static=True)
  compiled = tf.function(lambda i, l: sampler.subsample(i, 64, l),
                         jit_compile=True)
  sampled = compiled(tf.constant(indicator), tf.constant(labels)).numpy()
  _check(sampled, indicator, labels, 64, 0.25)
  hlo = compiled.experimental_get_compiler_ir(
      tf.constant(indicator), tf.constant(labels))(stage='hlo')
  assert 'ENTRY' in hlo


def test_samples_uniformly():
  # 2 of 10 positives per draw: each should be picked ~1/5 of the time.
  tf.random.set_seed(1)
  indicator = np.ones(20, bool)
  labels = np.arange(20) < 10
  sampler = Sampler(positive_fraction=0.5)
  counts = np.zeros(20)
  draws = 400
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(1)
    sampled = sampler.subsample(tf.constant(indicator), 4, tf.constant(labels))
    with tf.compat.v1.Session() as sess:
      for _ in range(draws):
        counts += sess.run(sampled)
  np.testing.assert_array_equal(counts[:10].sum(), 2 * draws)
  assert np.all(np.abs(counts / draws - 0.2) < 0.08), counts / draws


def test_subsample_indicator(execute):
  indicator = np.arange(30) % 3 == 0  # 10 Trues.
  picked = execute(
      lambda i: minibatch_sampler.MinibatchSampler.subsample_indicator(i, 4),
      [indicator])
  assert np.sum(picked) == 4 and not np.any(picked & ~indicator)
  picked = execute(
      lambda i: minibatch_sampler.MinibatchSampler.subsample_indicator(i, 40),
      [indicator])
  np.testing.assert_array_equal(picked, indicator)


@pytest.mark.parametrize('fraction', [-0.1, 1.5])
def test_rejects_bad_fraction(fraction):
  with pytest.raises(ValueError, match='positive_fraction'):
    Sampler(positive_fraction=fraction)


def test_rejects_bad_inputs():
  with tf.Graph().as_default():
    flags = tf.zeros([8], tf.bool)
    with pytest.raises(ValueError, match='indicator must be 1-D'):
      Sampler().subsample(tf.zeros([2, 4], tf.bool), 4, flags)
    with pytest.raises(ValueError, match='labels must be bool'):
      Sampler().subsample(flags, 4, tf.zeros([8], tf.int32))
    with pytest.raises(ValueError, match='int batch_size'):
      Sampler(is_static=True).subsample(flags, None, flags)
    unknown = tf.compat.v1.placeholder(tf.bool, [None])
    with pytest.raises(ValueError, match='static shape'):
      Sampler(is_static=True).subsample(unknown, 4, unknown)
    with pytest.raises(ValueError, match='positive_fraction > 0'):
      Sampler(positive_fraction=0.0).subsample(flags, None, flags)
