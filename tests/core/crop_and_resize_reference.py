"""tf.image.crop_and_resize in numpy, the reference of the crop op tests."""
import numpy as np


def crop_and_resize(image, boxes, crop_size, extrapolation_value=0.0):
  """Reference: tf.image.crop_and_resize's bilinear sampling, loop by loop."""
  batch, height, width, depth = image.shape
  crop_height, crop_width = crop_size
  out = np.zeros([batch, boxes.shape[1], crop_height, crop_width, depth])

  def positions(start, end, crop_length, length):
    if crop_length == 1:
      return [0.5 * (start + end) * (length - 1)]
    spacing = (end - start) * (length - 1) / (crop_length - 1)
    return [start * (length - 1) + k * spacing for k in range(crop_length)]

  for b in range(batch):
    for n, (ymin, xmin, ymax, xmax) in enumerate(boxes[b]):
      for i, y in enumerate(positions(ymin, ymax, crop_height, height)):
        for j, x in enumerate(positions(xmin, xmax, crop_width, width)):
          if not (0 <= y <= height - 1 and 0 <= x <= width - 1):
            out[b, n, i, j] = extrapolation_value
            continue
          top, left = int(np.floor(y)), int(np.floor(x))
          bottom, right = int(np.ceil(y)), int(np.ceil(x))
          dy, dx = y - top, x - left
          upper = image[b, top, left] * (1 - dx) + image[b, top, right] * dx
          lower = (image[b, bottom, left] * (1 - dx) +
                   image[b, bottom, right] * dx)
          out[b, n, i, j] = upper * (1 - dy) + lower * dy
  return out
