"""Heat maps, part masks and float channels drawn on numpy images, as the
original's visualization_utils functions of the same names (which
compat.visualization_utils gives).
"""
import matplotlib
import numpy as np
from PIL import Image
from PIL import ImageColor
from PIL import ImageDraw

from od_estimator.utils import visualization_utils

def draw_heatmaps_on_image(image, heatmaps):
  """Paints each [H, W] channel of `heatmaps` (0..1) on a PIL image in place.

  Channel c is drawn in STANDARD_COLORS[c], opaque where it is 1 and
  transparent where it is 0.
  """
  draw = ImageDraw.Draw(image)
  for channel in range(heatmaps.shape[2]):
    bitmap = Image.fromarray(
        (heatmaps[:, :, channel] * 255).astype(np.uint8), 'L')
    draw.bitmap((0, 0), bitmap,
                fill=visualization_utils.STANDARD_COLORS[channel])


def draw_heatmaps_on_image_array(image, heatmaps):
  """A new uint8 [H, W, 3] image: `image` with the heat maps painted on.

  Args:
    image: [H, W, 3] numpy array (or eager tensor).
    heatmaps: [H, W, C] values in [0, 1] (or eager tensor).
  """
  image, heatmaps = np.asarray(image), np.asarray(heatmaps)
  image_pil = Image.fromarray(np.uint8(image)).convert('RGB')
  draw_heatmaps_on_image(image_pil, heatmaps)
  return np.array(image_pil)


def _check_image_and(image, name, array, dtype):
  if image.dtype != np.uint8:
    raise ValueError('`image` not of type np.uint8')
  if array.dtype != dtype:
    raise ValueError('`%s` not of type np.%s' % (name, np.dtype(dtype).name))
  if image.shape[:2] != array.shape:
    raise ValueError('The image has spatial dimensions %s but the %s has '
                     'dimensions %s' % (image.shape[:2], name, array.shape))


def _blend(image, colors, inside, alpha):
  """image[inside] ← (1 - alpha) image + alpha colors, alpha on 8 bits."""
  weight = np.floor(255.0 * alpha) / 255.0
  blended = image[inside] * (1.0 - weight) + colors[inside] * weight
  image[inside] = np.round(blended).astype(np.uint8)
  return image


def draw_part_mask_on_image_array(image, mask, alpha=0.4, num_parts=24):
  """Colors body parts in place: mask value i + 1 in STANDARD_COLORS[i].

  Args:
    image: uint8 [H, W, 3].
    mask: uint8 [H, W], 0 outside, part index + 1 inside.
    alpha: opacity of the colors where mask > 0.
    num_parts: parts colored; higher values blend with black.
  """
  _check_image_and(image, 'mask', mask, np.uint8)
  colors = np.zeros(image.shape, np.float64)
  for part, color in enumerate(
      visualization_utils.STANDARD_COLORS[:num_parts]):
    colors[mask == part + 1] = ImageColor.getrgb(color)[:3]
  return _blend(image, colors, mask > 0, alpha)


def _colormap(name):
  """fn(values in [0, 1]) → [..., 3] RGB in [0, 1]: matplotlib's cmap."""
  try:
    colormap = matplotlib.colormaps[name]
  except KeyError:
    raise ValueError('cmap %r is not a matplotlib colormap; for example: %s'
                     % (name, ', '.join(sorted(matplotlib.colormaps)[:8])))
  return lambda values: colormap(values)[..., :3]


def draw_float_channel_on_image_array(image, channel, mask, alpha=0.9,
                                      cmap='YlGn'):
  """Draws a float channel (e.g. DensePose coordinates) in place.

  Args:
    image: uint8 [H, W, 3].
    channel: float32 [H, W] values in [0, 1], colored with `cmap`.
    mask: uint8 [H, W]; drawn where mask > 0.
    alpha: opacity of the colors.
    cmap: a matplotlib colormap name.
  """
  _check_image_and(image, 'channel', channel, np.float32)
  _check_image_and(image, 'mask', mask, np.uint8)
  colors = np.uint8(_colormap(cmap)(channel) * 255).astype(np.float64)
  return _blend(image, colors, mask > 0, alpha)
