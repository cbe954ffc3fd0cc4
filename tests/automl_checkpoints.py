"""Checkpoints laid out as Google's automl EfficientDet writes them.

tests/data/automl/efficientdet-d0.variables.txt records the variables of
automl's efficientdet-d0 network (its TF1 `efficientdet_arch`): name and
shape, one per line (see tests/data/automl/README.md for how they were
recorded). `write` lays out a name-based checkpoint with those variables,
their `/ExponentialMovingAverage` copies (automl keeps one for every
trainable variable and batch-norm statistic), `global_step` and a
`/Momentum` slot of each kernel, as its training writes. The values follow
`value` (numpy only, so the recording script computes automl's detections
on the same values).
"""
import os

import numpy as np

from tests import seeded_values

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                      'automl')
EMA = '/ExponentialMovingAverage'
# The seeded image and the size automl's detections were recorded at.
IMAGE_SIZE = 128


def variables(name='efficientdet-d0'):
  """[(variable name, shape)] recorded for automl's `name` network."""
  lines = []
  with open(os.path.join(FOLDER, name + '.variables.txt')) as text:
    for line in text:
      if line.strip() and not line.startswith('#'):
        variable, shape = line.rstrip('\n').split('\t')
        lines.append((variable, [int(size) for size in shape.split(',')
                                 if size]))
  return lines


def value(key, shape):
  """The float32 value saved under `key` (a variable name, or its EMA copy).

  seeded_values' rule, but the fast-attention weights (`WSM`) are positive
  (so no input of a BiFPN node is switched off) and the prediction layers'
  pointwise kernels a fiftieth of it (logits and box codes of a few units:
  this deep network on these values gives features of tens).
  """
  name, _, copy = key.partition(EMA)
  # seeded_values reads the kind of value (gamma, kernel...) from the part
  # of its key before '/.ATTRIBUTES/' and seeds its generator by the key.
  seeded_key = '%s/.ATTRIBUTES/%s' % (name, 'AVERAGE' if copy or
                                      key.endswith(EMA) else 'VALUE')
  if name.rpartition('/')[2].startswith('WSM'):
    return np.float32(0.5) + np.abs(seeded_values.value(seeded_key, shape))
  result = seeded_values.value(seeded_key, shape)
  if '-predict/pointwise_kernel' in key:
    result *= np.float32(0.02)
  return result


def checkpoint_values(lines, with_average=True, with_training_state=True):
  """{checkpoint key: numpy value} laid out as automl's training saves."""
  values = {}
  for name, shape in lines:
    values[name] = value(name, shape)
    if with_average:
      values[name + EMA] = value(name + EMA, shape)
    if with_training_state and name.endswith('kernel'):
      values[name + '/Momentum'] = np.zeros(shape, np.float32)
  if with_training_state:
    values['global_step'] = np.int64(1000)
  return values


def write(prefix, values):
  """Writes {key: numpy value} as a name-based TF checkpoint at prefix, and
  the folder's `checkpoint` file naming it (as automl's archives have)."""
  # Imported here: the recording script runs this module in the original's
  # environment, which has no od_estimator.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from od_estimator.compat import automl_checkpoint  # pylint: disable=g-import-not-at-top
  automl_checkpoint.write(prefix, values)
  tf.compat.v1.train.update_checkpoint_state(os.path.dirname(prefix), prefix)
  return prefix
