"""Crop ops in numpy (tf.image.crop_and_resize, R-FCN's position-sensitive
crop), the references of the crop op tests."""
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


def position_sensitive_crop(images, boxes, crop_size, num_spatial_bins,
                            global_pool):
  """Reference: bin by bin, each bin cropped from its own channel group."""
  bins_y, bins_x = num_spatial_bins
  bin_height, bin_width = crop_size[0] // bins_y, crop_size[1] // bins_x
  channels = images.shape[-1] // (bins_y * bins_x)
  batch, num_boxes = boxes.shape[:2]
  out = np.zeros([batch, num_boxes, crop_size[0], crop_size[1], channels])
  pooled = np.zeros([batch, num_boxes, 1, 1, channels])
  for bin_y in range(bins_y):
    for bin_x in range(bins_x):
      group = bin_y * bins_x + bin_x
      ymin, xmin, ymax, xmax = np.moveaxis(boxes, -1, 0)
      height, width = (ymax - ymin) / bins_y, (xmax - xmin) / bins_x
      bin_boxes = np.stack([ymin + bin_y * height, xmin + bin_x * width,
                            ymin + (bin_y + 1) * height,
                            xmin + (bin_x + 1) * width], -1)
      crops = crop_and_resize(
          images[..., group * channels:(group + 1) * channels], bin_boxes,
          [bin_height, bin_width])
      out[:, :, bin_y * bin_height:(bin_y + 1) * bin_height,
          bin_x * bin_width:(bin_x + 1) * bin_width] = crops
      pooled += crops.mean(axis=(2, 3), keepdims=True) / (bins_y * bins_x)
  return pooled if global_pool else out
