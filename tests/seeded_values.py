"""Checkpoint values and a test image made by a fixed rule, numpy only.

Both sides of tests/data/tf2_detections/ use this rule: the original's TF2
model took its values from it when its detections were recorded, and our
test writes the same values under the same checkpoint keys. Each value
depends only on its TF2 checkpoint key and shape, so no weights are
stored. Scales keep activations of order one through deep networks:
He-scaled kernels, batch-norm gammas and variances in [0.5, 1.5), small
biases, betas and means. The box and class prediction layers' (pointwise)
kernels are a quarter of that, so box codes and logits are of order one:
saturated scores would tie, and their order hang on rounding.
`damped_value` scales a few of them further for deep residual networks.
"""
import hashlib
import re

import numpy as np

_ATTRIBUTES = '/.ATTRIBUTES/'
# Object paths of the last layers of the TF2 box and class heads.
_PREDICTION_LAYERS = ('/_box_encoder_layers/', '/_class_predictor_layers/')


def _rng(key):
  digest = hashlib.sha256(key.encode('utf-8')).digest()
  return np.random.default_rng(int.from_bytes(digest[:8], 'little'))


def value(key, shape):
  """The float32 value saved under checkpoint `key`, of `shape`.

  Args:
    key: TF2 checkpoint key, e.g.
      'model/_box_predictor/.../kernel/.ATTRIBUTES/VARIABLE_VALUE'.
    shape: list of ints.

  Returns:
    numpy float32 array of `shape`.
  """
  rng = _rng(key)
  attribute = key.partition(_ATTRIBUTES)[0].rpartition('/')[2]
  if attribute in ('gamma', 'moving_variance'):
    return 0.5 + rng.random(shape, np.float32)
  if attribute in ('kernel', 'depthwise_kernel', 'pointwise_kernel'):
    # A depthwise kernel [h, w, in, multiplier] sums over h * w only.
    fan_in = np.prod(shape[:2] if attribute == 'depthwise_kernel' else
                     shape[:-1])
    scale = 0.25 if attribute != 'depthwise_kernel' and any(
        part in key for part in _PREDICTION_LAYERS) else 1.0
    std = scale * np.sqrt(2.0 / fan_in)
  else:  # bias, beta, moving_mean
    std = 0.1
  return np.float32(std) * rng.standard_normal(shape, np.float32)


# Damping of value() for deep residual networks on raw pixels (ResNet
# Faster R-CNN): conv1 reads mean-subtracted pixels of about +-128, and
# every residual branch adds to its shortcut, so without it activations
# grow by orders of magnitude and every score saturates.
_FIRST_KERNEL = 'conv1_conv/kernel'
_PIXEL_SCALE = 1.0 / 128
_RESIDUAL_GAMMA = re.compile(r'(^|/)conv\d_block\d+_3_bn/gamma$')
_RESIDUAL_SCALE = 0.1


def damped_value(key, keras_name, shape):
  """value(key, shape), scaled for a Keras ResNet: conv1's kernel by 1/128,
  the gamma of each block's last batch norm (its residual branch) by 0.1.

  Args:
    key: TF2 checkpoint key.
    keras_name: the variable's Keras name, e.g. 'conv2_block1_3_bn/gamma'.
    shape: list of ints.
  """
  scale = 1.0
  if keras_name == _FIRST_KERNEL:
    scale = _PIXEL_SCALE
  elif _RESIDUAL_GAMMA.search(keras_name):
    scale = _RESIDUAL_SCALE
  return np.float32(scale) * value(key, shape)


def image(height=120, width=144):
  """A uint8 [height, width, 3] pattern: gradients, squares and stripes."""
  y, x = np.mgrid[:height, :width]
  red = (3 * x + 5 * y) % 256
  green = ((x // 12 + y // 12) % 2) * 200 + 20
  blue = (x * y) % 251
  return np.stack([red, green, blue], axis=-1).astype(np.uint8)
