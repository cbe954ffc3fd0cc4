"""Cropping and padding augmentations (single image, no batch dimension).

Every op keeps the per-box tensors consistent: a box dropped by a crop takes
its label, weights, confidences, scores, mask and keypoints with it, and the
kept boxes are expressed (and optionally clipped) in the new image's
normalized frame. Optional inputs that are None are left out of the
returned tuple, so each op returns the tensors it was given, in argument
order (M is the number of boxes kept).

Shared argument conventions (the op docstrings list only the rest):
  image: [H, W, C] float32.
  boxes: [N, 4] float32 normalized ymin, xmin, ymax, xmax.
  labels: [N] int32.
  label_weights, label_confidences, mask_weights: [N] float32 or None.
  multiclass_scores: [N, num_classes] float32 or None.
  masks: [N, H, W] float32 or None.
  keypoints: [N, K, 2] float32 normalized y, x or None; keypoints that a
    clipping crop leaves outside the image become NaN.
  keypoint_visibilities: [N, K] bool or None.
  densepose_num_points [N] int32, densepose_part_ids [N, P] int32,
    densepose_surface_coords [N, P, 4] float32 y, x, v, u: all or none.
  seed: op-level random seed.
"""
import sys

import numpy as np
import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import box_list
from od_estimator.core import box_list_ops

_UNIT_WINDOW = (0.0, 0.0, 1.0, 1.0)


def _present(*tensors):
  return tuple(t for t in tensors if t is not None)


def _to_window(window):
  return tf.cast(window, tf.float32)


def _pad_to(tensor, offset_y, offset_x, height, width):
  """Pads the row / column axes of a [..., h, w, C] tensor to height, width.

  tf.pad instead of tf.image.pad_to_bounding_box: a fraction of the ops.
  """
  shape = tf.shape(tensor)
  rank = tensor.shape.ndims
  paddings = [[0, 0]] * (rank - 3) + [
      [offset_y, height - shape[rank - 3] - offset_y],
      [offset_x, width - shape[rank - 2] - offset_x], [0, 0]]
  return tf.pad(tensor, paddings)


def _crop_boxes(boxes, window, overlap_thresh, clip_boxes):
  """Keeps boxes that meet a window and re-expresses them in its frame.

  A box is kept when it is not completely outside the window and at least
  `overlap_thresh` of its area lies inside it.

  Args:
    boxes: [N, 4] float32.
    window: [4] float32 ymin, xmin, ymax, xmax in the boxes' frame.
    overlap_thresh: minimum fraction of a box's area inside the window.
    clip_boxes: clip the kept boxes to the window.

  Returns:
    new_boxes: [M, 4] float32 in the window's normalized frame.
    keep: [M] int32 indices of the kept input boxes.
  """
  window = _to_window(window)
  boxes = tf.reshape(boxes, [-1, 4])
  boxlist = box_list.BoxList(boxes)
  boxlist.add_field('index', tf.range(tf.shape(boxes)[0]))
  boxlist, _ = box_list_ops.prune_completely_outside_window(boxlist, window)
  boxlist, _ = box_list_ops.prune_non_overlapping_boxes(
      boxlist, box_list.BoxList(tf.reshape(window, [1, 4])), overlap_thresh)
  boxlist = box_list_ops.change_coordinate_frame(boxlist, window)
  if clip_boxes:
    boxlist = box_list_ops.clip_to_window(
        boxlist, tf.constant(_UNIT_WINDOW), filter_nonoverlapping=False)
  return boxlist.get(), boxlist.get_field('index')


def _boxes_to_window(boxes, window):
  """Re-expresses boxes in a window's frame without dropping any."""
  boxlist = box_list.BoxList(tf.reshape(boxes, [-1, 4]))
  return box_list_ops.change_coordinate_frame(boxlist,
                                              _to_window(window)).get()


def _keypoints_to_window(keypoints, window, prune):
  """Changes keypoint frame; with prune, keypoints left outside become NaN."""
  keypoints = augment_common.change_keypoint_coordinate_frame(keypoints,
                                                              window)
  if prune:
    keypoints = augment_common.prune_keypoints_outside_window(
        keypoints, tf.constant(_UNIT_WINDOW))
  return keypoints


def _update_visibilities(keypoints, visibilities):
  """Marks keypoints with a NaN coordinate as not visible."""
  has_nan = tf.reduce_any(tf.math.is_nan(keypoints), axis=2)
  return tf.logical_and(tf.cast(visibilities, tf.bool),
                        tf.logical_not(has_nan))


def _densepose_coords_to_window(surface_coords, window):
  """Moves DensePose y, x (of y, x, v, u) into a window's frame."""
  window = _to_window(window)
  origin = window[:2]
  size = window[2:] - window[:2]
  return tf.concat([(surface_coords[:, :, :2] - origin) / size,
                    surface_coords[:, :, 2:]], axis=-1)


def _prune_densepose_outside_unit_window(num_points, part_ids,
                                         surface_coords):
  """Drops DensePose points outside [0, 1], as the original does.

  Points that stay inside (and within each instance's valid count) move to
  the front in their old order, the rest are zero-filled, and the point axis
  is trimmed to the largest remaining count P'.

  Returns:
    (num_points [N], part_ids [N, P'], surface_coords [N, P', 4]).
  """
  y, x = surface_coords[:, :, 0], surface_coords[:, :, 1]
  point_index = tf.range(tf.shape(part_ids)[1])
  valid = tf.logical_and(
      point_index[tf.newaxis, :] < num_points[:, tf.newaxis],
      tf.logical_and(tf.logical_and(y >= 0.0, y <= 1.0),
                     tf.logical_and(x >= 0.0, x <= 1.0)))
  new_num_points = tf.reduce_sum(tf.cast(valid, tf.int32), axis=1)
  # A stable sort on "invalid" moves valid points first in their old order.
  order = tf.argsort(tf.cast(tf.logical_not(valid), tf.int32), axis=1,
                     stable=True)
  width = tf.reduce_max(tf.concat([new_num_points, [0]], axis=0))
  order = order[:, :width]
  valid = tf.gather(valid, order, batch_dims=1)
  part_ids = tf.where(valid, tf.gather(part_ids, order, batch_dims=1),
                      tf.zeros_like(valid, tf.int32))
  surface_coords = tf.where(
      valid[:, :, tf.newaxis],
      tf.gather(surface_coords, order, batch_dims=1), 0.0)
  return new_num_points, part_ids, surface_coords


def _check_densepose(num_points, part_ids, surface_coords):
  given = [t is not None for t in (num_points, part_ids, surface_coords)]
  if any(given) and not all(given):
    raise ValueError('DensePose cropping needs densepose_num_points, '
                     'densepose_part_ids and densepose_surface_coords '
                     'together.')


def random_crop_image(image, boxes, labels, label_weights,
                      label_confidences=None, multiclass_scores=None,
                      masks=None, mask_weights=None, keypoints=None,
                      keypoint_visibilities=None, densepose_num_points=None,
                      densepose_part_ids=None, densepose_surface_coords=None,
                      min_object_covered=1.0, aspect_ratio_range=(0.75, 1.33),
                      area_range=(0.1, 1.0), overlap_thresh=0.3,
                      clip_boxes=True, random_coef=0.0, seed=None):
  """Randomly crops the image (tf.image.sample_distorted_bounding_box).

  The crop must cover at least `min_object_covered` of some box; if 100
  attempts fail, the whole image is used. Boxes completely outside the crop
  or with less than `overlap_thresh` of their area inside it are dropped
  with all their per-box tensors. With clip_boxes, keypoints left outside
  become NaN and invisible, and DensePose points outside are dropped.

  Args:
    image ... densepose_surface_coords, seed: see the module docstring.
    min_object_covered: fraction of some box the crop must cover.
    aspect_ratio_range: (min, max) crop width / height in pixels.
    area_range: (min, max) crop area as a fraction of the image area.
    overlap_thresh: minimum fraction of a box inside the crop to keep it.
    clip_boxes: clip kept boxes (and prune keypoints) to the crop.
    random_coef: probability of returning the inputs unchanged (float or
      float32 scalar tensor).

  Returns:
    (image [h, w, C], boxes [M, 4], labels [M]) followed by the given
    optional tensors in argument order.

  Raises:
    ValueError: if only some of the DensePose tensors are given.
  """
  _check_densepose(densepose_num_points, densepose_part_ids,
                   densepose_surface_coords)
  inputs = (image, boxes, labels, label_weights, label_confidences,
            multiclass_scores, masks, mask_weights, keypoints,
            keypoint_visibilities, densepose_num_points, densepose_part_ids,
            densepose_surface_coords)

  def crop(image, boxes, labels, label_weights, label_confidences,
           multiclass_scores, masks, mask_weights, keypoints,
           keypoint_visibilities, densepose_num_points, densepose_part_ids,
           densepose_surface_coords):
    """Always crops (the inputs come in as arguments to be rebound)."""
    with tf.name_scope('RandomCropImage'):
      boxes = tf.reshape(boxes, [-1, 4])
      # The tf.image wrappers leave the sampler unseeded without an op
      # seed; deriving one from the graph seed makes crops reproducible
      # under tf.compat.v1.set_random_seed. `seed` is not reused: it drives
      # the random_coef draw, and sharing it would correlate the two.
      graph_seed, op_seed = tf.compat.v1.get_seed(None)
      sampled = tf.raw_ops.SampleDistortedBoundingBoxV2(
          image_size=tf.shape(image),
          # Clipped: the sampler must only see the parts inside the image.
          bounding_boxes=tf.clip_by_value(boxes, 0.0, 1.0)[:, tf.newaxis],
          min_object_covered=min_object_covered,
          seed=graph_seed or 0, seed2=op_seed or 0,
          aspect_ratio_range=aspect_ratio_range, area_range=area_range,
          max_attempts=100, use_image_if_no_bounding_boxes=True)
      begin, size, window = sampled
      end = begin + size
      window = tf.reshape(window, [4])
      new_image = image[begin[0]:end[0], begin[1]:end[1], :]
      new_image.set_shape([None, None, image.shape[2]])

      new_boxes, keep = _crop_boxes(boxes, window, overlap_thresh,
                                    clip_boxes)
      (labels, label_weights, label_confidences, multiclass_scores, masks,
       mask_weights, keypoints, keypoint_visibilities, densepose_num_points,
       densepose_part_ids, densepose_surface_coords) = (
           augment_common.gather_per_box(keep, (
               labels, label_weights, label_confidences, multiclass_scores,
               masks, mask_weights, keypoints, keypoint_visibilities,
               densepose_num_points, densepose_part_ids,
               densepose_surface_coords)))
      if masks is not None:
        masks = masks[:, begin[0]:end[0], begin[1]:end[1]]
      if keypoints is not None:
        keypoints = _keypoints_to_window(keypoints, window, prune=clip_boxes)
        if keypoint_visibilities is not None and clip_boxes:
          keypoint_visibilities = _update_visibilities(
              keypoints, keypoint_visibilities)
      if densepose_num_points is not None:
        densepose_surface_coords = _densepose_coords_to_window(
            densepose_surface_coords, window)
        if clip_boxes:
          (densepose_num_points, densepose_part_ids,
           densepose_surface_coords) = _prune_densepose_outside_unit_window(
               densepose_num_points, densepose_part_ids,
               densepose_surface_coords)
      return _present(new_image, new_boxes, labels, label_weights,
                      label_confidences, multiclass_scores, masks,
                      mask_weights, keypoints, keypoint_visibilities,
                      densepose_num_points, densepose_part_ids,
                      densepose_surface_coords)

  # Skipping the cond when a crop is certain keeps the graph simple.
  if (isinstance(random_coef, (int, float)) and
      random_coef < sys.float_info.min):
    return crop(*inputs)
  do_crop = tf.greater(augment_common.random_uniform_scalar(seed=seed),
                       random_coef)
  return tuple(tf.cond(do_crop, lambda: crop(*inputs),
                       lambda: _present(*inputs)))


def random_pad_image(image, boxes, masks=None, keypoints=None,
                     densepose_surface_coords=None, min_image_size=None,
                     max_image_size=None, pad_color=None, center_pad=False,
                     seed=None):
  """Randomly pads the image to a size in [min_image_size, max_image_size).

  The image is placed at a random (or centred) offset; boxes, keypoints and
  DensePose points keep their place on the image content.

  Args:
    image, boxes, masks, keypoints, densepose_surface_coords, seed: see the
      module docstring; masks are padded with zeros.
    min_image_size: [2] int32 (height, width); defaults to the image size and
      is never smaller than it.
    max_image_size: [2] int32; defaults to twice the image size and is never
      smaller than the image.
    pad_color: [C] float32 padding colour; defaults to the image's mean.
    center_pad: centre the image instead of a random offset.

  Returns:
    (image [h, w, C], boxes [N, 4]) then masks [N, h, w], keypoints and
    densepose_surface_coords when given.
  """
  if pad_color is None:
    pad_color = tf.reduce_mean(image, axis=[0, 1])
  image_shape = tf.shape(image)
  height, width = image_shape[0], image_shape[1]
  image_size = tf.stack([height, width])
  if max_image_size is None:
    max_image_size = image_size * 2
  max_image_size = tf.maximum(tf.cast(max_image_size, tf.int32), image_size)
  if min_image_size is None:
    min_image_size = image_size
  min_image_size = tf.maximum(tf.cast(min_image_size, tf.int32), image_size)

  def draw(low, high):
    # Uniform in [low, high), or `high` for an empty range; tf.where instead
    # of tf.cond keeps the graph small.
    value = low + augment_common.random_integer(
        0, tf.maximum(high - low, 1), seed)
    return tf.where(high > low, value, high)

  target_height = draw(min_image_size[0], max_image_size[0])
  target_width = draw(min_image_size[1], max_image_size[1])
  if center_pad:
    offset_height = (target_height - height) // 2
    offset_width = (target_width - width) // 2
  else:
    offset_height = draw(0, target_height - height)
    offset_width = draw(0, target_width - width)

  def pad(tensor):
    return _pad_to(tensor, offset_height, offset_width, target_height,
                   target_width)

  # Zero padding of (image - colour), plus the colour, pads with the colour.
  pad_color = tf.cast(pad_color, tf.float32)
  new_image = pad(image - pad_color) + pad_color
  window = tf.cast(tf.stack([
      -offset_height, -offset_width, target_height - offset_height,
      target_width - offset_width]), tf.float32) / tf.cast(
          tf.stack([height, width, height, width]), tf.float32)
  new_boxes = _boxes_to_window(boxes, window)
  if masks is not None:
    masks = pad(masks[:, :, :, tf.newaxis])[:, :, :, 0]
  if keypoints is not None:
    keypoints = _keypoints_to_window(keypoints, window, prune=False)
  if densepose_surface_coords is not None:
    densepose_surface_coords = _densepose_coords_to_window(
        densepose_surface_coords, window)
  return _present(new_image, new_boxes, masks, keypoints,
                  densepose_surface_coords)


def random_absolute_pad_image(image, boxes, masks=None, keypoints=None,
                              densepose_surface_coords=None,
                              max_height_padding=None, max_width_padding=None,
                              pad_color=None, seed=None):
  """Pads by a random number of pixels in [0, max_*_padding) per axis.

  Args:
    image, boxes, masks, keypoints, densepose_surface_coords, pad_color,
      seed: as random_pad_image.
    max_height_padding: int32 scalar, exclusive bound on the added rows.
    max_width_padding: int32 scalar, exclusive bound on the added columns.

  Returns:
    As random_pad_image.
  """
  min_image_size = tf.shape(image)[:2]
  max_image_size = min_image_size + tf.cast(
      tf.stack([max_height_padding, max_width_padding]), tf.int32)
  return random_pad_image(
      image, boxes, masks=masks, keypoints=keypoints,
      densepose_surface_coords=densepose_surface_coords,
      min_image_size=min_image_size, max_image_size=max_image_size,
      pad_color=pad_color, seed=seed)


def random_crop_pad_image(image, boxes, labels, label_weights,
                          label_confidences=None, multiclass_scores=None,
                          min_object_covered=1.0,
                          aspect_ratio_range=(0.75, 1.33),
                          area_range=(0.1, 1.0), overlap_thresh=0.3,
                          clip_boxes=True, random_coef=0.0,
                          min_padded_size_ratio=(1.0, 1.0),
                          max_padded_size_ratio=(2.0, 2.0), pad_color=None,
                          seed=None):
  """random_crop_image followed by random_pad_image.

  The padded size lies between min_padded_size_ratio and
  max_padded_size_ratio times the ORIGINAL image size (not the crop's).

  Args:
    image, boxes, labels, label_weights, label_confidences,
      multiclass_scores, min_object_covered, aspect_ratio_range, area_range,
      overlap_thresh, clip_boxes, random_coef, seed: as random_crop_image.
    min_padded_size_ratio: (height, width) ratios of the smallest output.
    max_padded_size_ratio: (height, width) ratios of the largest output.
    pad_color: [C] float32; defaults to the crop's mean colour.

  Returns:
    (image, boxes [M, 4], labels [M]) then label_weights, label_confidences
    and multiclass_scores when given.
  """
  image_size = tf.cast(tf.shape(image)[:2], tf.float32)
  cropped = random_crop_image(
      image, boxes, labels, label_weights,
      label_confidences=label_confidences,
      multiclass_scores=multiclass_scores,
      min_object_covered=min_object_covered,
      aspect_ratio_range=aspect_ratio_range, area_range=area_range,
      overlap_thresh=overlap_thresh, clip_boxes=clip_boxes,
      random_coef=random_coef, seed=seed)
  padded_image, padded_boxes = random_pad_image(
      cropped[0], cropped[1],
      min_image_size=tf.cast(image_size * min_padded_size_ratio, tf.int32),
      max_image_size=tf.cast(image_size * max_padded_size_ratio, tf.int32),
      pad_color=pad_color, seed=seed)
  return (padded_image, padded_boxes) + tuple(cropped[2:])


def random_crop_to_aspect_ratio(image, boxes, labels, label_weights,
                                label_confidences=None,
                                multiclass_scores=None, masks=None,
                                keypoints=None, aspect_ratio=1.0,
                                overlap_thresh=0.3, clip_boxes=True,
                                center_crop=False, seed=None):
  """Crops the largest window of the given aspect ratio at a random offset.

  Only one axis is cropped: rows when the image is narrower than the target
  ratio, columns when it is wider.

  Args:
    image, boxes, labels, label_weights, label_confidences,
      multiclass_scores, masks, keypoints, overlap_thresh, clip_boxes, seed:
      as random_crop_image.
    aspect_ratio: target width / height.
    center_crop: take the centred window instead of a random one.

  Returns:
    (image, boxes [M, 4], labels [M]) then label_weights, label_confidences,
    multiclass_scores, masks and keypoints when given.

  Raises:
    ValueError: if the image is not rank 3.
  """
  if image.shape.ndims != 3:
    raise ValueError('Image should be a 3D tensor, got shape %s' %
                     image.shape)
  with tf.name_scope('RandomCropToAspectRatio'):
    image_shape = tf.shape(image)
    height, width = image_shape[0], image_shape[1]
    height_f, width_f = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    image_ratio = width_f / height_f
    target_height = tf.where(
        image_ratio >= aspect_ratio, height,
        tf.cast(tf.round(width_f / aspect_ratio), tf.int32))
    target_width = tf.where(
        image_ratio <= aspect_ratio, width,
        tf.cast(tf.round(height_f * aspect_ratio), tf.int32))
    if center_crop:
      offset_height = (height - target_height) // 2
      offset_width = (width - target_width) // 2
    else:
      offset_height = augment_common.random_integer(
          0, height - target_height + 1, seed)
      offset_width = augment_common.random_integer(
          0, width - target_width + 1, seed)
    new_image = image[offset_height:offset_height + target_height,
                      offset_width:offset_width + target_width, :]
    window = tf.cast(tf.stack([
        offset_height, offset_width, offset_height + target_height,
        offset_width + target_width]), tf.float32) / tf.stack(
            [height_f, width_f, height_f, width_f])

    new_boxes, keep = _crop_boxes(boxes, window, overlap_thresh, clip_boxes)
    (labels, label_weights, label_confidences, multiclass_scores, masks,
     keypoints) = augment_common.gather_per_box(
         keep, (labels, label_weights, label_confidences, multiclass_scores,
                masks, keypoints))
    if masks is not None:
      masks = tf.slice(masks, tf.stack([0, offset_height, offset_width]),
                       tf.stack([-1, target_height, target_width]))
    if keypoints is not None:
      keypoints = _keypoints_to_window(keypoints, window, prune=clip_boxes)
    return _present(new_image, new_boxes, labels, label_weights,
                    label_confidences, multiclass_scores, masks, keypoints)


def random_pad_to_aspect_ratio(image, boxes, masks=None, keypoints=None,
                               aspect_ratio=1.0,
                               min_padded_size_ratio=(1.0, 1.0),
                               max_padded_size_ratio=(2.0, 2.0), seed=None):
  """Zero-pads the bottom / right of the image to the given aspect ratio.

  The smallest padding reaching the ratio is scaled by a random factor
  chosen so the output stays within [min, max]_padded_size_ratio times the
  image size where the ratio allows it (the ratio always wins).

  Args:
    image, boxes, masks, keypoints, seed: see the module docstring.
    aspect_ratio: target width / height.
    min_padded_size_ratio: (height, width) minimum output / input ratios.
    max_padded_size_ratio: (height, width) maximum output / input ratios.

  Returns:
    (image, boxes [N, 4]) then masks and keypoints when given.

  Raises:
    ValueError: if the image is not rank 3.
  """
  if image.shape.ndims != 3:
    raise ValueError('Image should be a 3D tensor, got shape %s' %
                     image.shape)
  with tf.name_scope('RandomPadToAspectRatio'):
    image_shape = tf.cast(tf.shape(image), tf.float32)
    height, width = image_shape[0], image_shape[1]
    image_ratio = width / height
    target_height = tf.where(image_ratio <= aspect_ratio, height,
                             width / aspect_ratio)
    target_width = tf.where(image_ratio >= aspect_ratio, width,
                            height * aspect_ratio)
    min_height = tf.maximum(min_padded_size_ratio[0] * height, target_height)
    min_width = tf.maximum(min_padded_size_ratio[1] * width, target_width)
    max_height = tf.maximum(max_padded_size_ratio[0] * height, target_height)
    max_width = tf.maximum(max_padded_size_ratio[1] * width, target_width)
    max_scale = tf.minimum(max_height / target_height,
                           max_width / target_width)
    min_scale = tf.minimum(max_scale, tf.maximum(min_height / target_height,
                                                 min_width / target_width))
    scale = augment_common.random_uniform_scalar(min_scale, max_scale, seed)
    target_height = tf.round(scale * target_height)
    target_width = tf.round(scale * target_width)
    out_height = tf.cast(target_height, tf.int32)
    out_width = tf.cast(target_width, tf.int32)

    new_image = _pad_to(image, 0, 0, out_height, out_width)
    window = tf.stack([0.0, 0.0, target_height / height,
                       target_width / width])
    result = [new_image, _boxes_to_window(boxes, window)]
    if masks is not None:
      result.append(_pad_to(masks[:, :, :, tf.newaxis], 0, 0, out_height,
                            out_width)[:, :, :, 0])
    if keypoints is not None:
      result.append(_keypoints_to_window(keypoints, window, prune=False))
    return tuple(result)


def _case_key(value):
  """A comparable stand-in for a per-case argument value."""
  if value is None or isinstance(value, (bool, int, float)):
    return value
  if isinstance(value, (list, tuple)) and all(
      isinstance(v, (int, float)) for v in value):
    return tuple(value)
  return id(value)  # Tensors and other objects only equal themselves.


def _run_random_case(func, inputs, cases, tensor_args):
  """Returns func(*inputs, **arguments of one uniformly drawn case).

  When the arguments outside `tensor_args` agree across cases (the usual
  SSD setting), one op is built and the drawn case's `tensor_args` values
  are gathered as tensors; otherwise each case gets its own tf.switch_case
  branch. Both give the same distribution, the first a far smaller graph.

  Args:
    func: function(*inputs, **case_arguments) returning a tuple.
    inputs: tuple of tensors (or None) passed positionally.
    cases: dict argument name -> sequence with one value per case.
    tensor_args: names of numeric arguments func accepts as tensors.

  Returns:
    func's output as a tuple.
  """
  num_cases = len(next(iter(cases.values())))
  same = {name: len(set(_case_key(v) for v in values)) == 1
          for name, values in cases.items()}
  # The original draws the case without the op seed; so do we.
  case = augment_common.random_integer(0, num_cases)
  if all(same[name] for name in cases if name not in tensor_args):
    arguments = {
        name: values[0] if same[name] else tf.gather(
            tf.constant(values, tf.float32), case)
        for name, values in cases.items()}
    return tuple(func(*inputs, **arguments))
  branches = [
      lambda i=i: func(*inputs, **{n: v[i] for n, v in cases.items()})
      for i in range(num_cases)]
  return tuple(tf.switch_case(case, branches))


def ssd_random_crop(image, boxes, labels, label_weights,
                    label_confidences=None, multiclass_scores=None,
                    masks=None, keypoints=None,
                    min_object_covered=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                    aspect_ratio_range=((0.5, 2.0),) * 7,
                    area_range=((0.1, 1.0),) * 7,
                    overlap_thresh=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                    clip_boxes=(True,) * 7, random_coef=(0.15,) * 7,
                    seed=None):
  """SSD-paper crop: random_crop_image with one of several parameter sets.

  Each sequence argument holds one value per case; a case is chosen
  uniformly at random and only that case's crop runs.

  Args:
    image, boxes, labels, label_weights, label_confidences,
      multiclass_scores, masks, keypoints, seed: as random_crop_image.
    min_object_covered, aspect_ratio_range, area_range, overlap_thresh,
      clip_boxes, random_coef: per-case values of the random_crop_image
      arguments of the same names.

  Returns:
    (image, boxes, labels) then label_weights, label_confidences,
    multiclass_scores, masks and keypoints when given.
  """
  def crop(image, boxes, labels, label_weights, label_confidences,
           multiclass_scores, masks, keypoints, **case_args):
    return random_crop_image(
        image, boxes, labels, label_weights,
        label_confidences=label_confidences,
        multiclass_scores=multiclass_scores, masks=masks, keypoints=keypoints,
        seed=seed, **case_args)

  return _run_random_case(
      crop, (image, boxes, labels, label_weights, label_confidences,
             multiclass_scores, masks, keypoints),
      dict(min_object_covered=min_object_covered,
           aspect_ratio_range=aspect_ratio_range, area_range=area_range,
           overlap_thresh=overlap_thresh, clip_boxes=clip_boxes,
           random_coef=random_coef),
      tensor_args=('min_object_covered', 'overlap_thresh', 'random_coef'))


def ssd_random_crop_pad(image, boxes, labels, label_weights,
                        label_confidences=None, multiclass_scores=None,
                        min_object_covered=(0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                        aspect_ratio_range=((0.5, 2.0),) * 6,
                        area_range=((0.1, 1.0),) * 6,
                        overlap_thresh=(0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                        clip_boxes=(True,) * 6, random_coef=(0.15,) * 6,
                        min_padded_size_ratio=((1.0, 1.0),) * 6,
                        max_padded_size_ratio=((2.0, 2.0),) * 6,
                        pad_color=(None,) * 6, seed=None):
  """SSD-paper crop and pad: random_crop_pad_image with per-case settings.

  Args:
    image, boxes, labels, label_weights, label_confidences,
      multiclass_scores, seed: as random_crop_pad_image.
    min_object_covered, aspect_ratio_range, area_range, overlap_thresh,
      clip_boxes, random_coef, min_padded_size_ratio, max_padded_size_ratio,
      pad_color: per-case values of the random_crop_pad_image arguments.

  Returns:
    (image, boxes, labels) then label_weights, label_confidences and
    multiclass_scores when given.
  """
  def crop_pad(*inputs, **case_args):
    return random_crop_pad_image(*inputs, seed=seed, **case_args)

  return _run_random_case(
      crop_pad, (image, boxes, labels, label_weights, label_confidences,
                 multiclass_scores),
      dict(min_object_covered=min_object_covered,
           aspect_ratio_range=aspect_ratio_range, area_range=area_range,
           overlap_thresh=overlap_thresh, clip_boxes=clip_boxes,
           random_coef=random_coef,
           min_padded_size_ratio=min_padded_size_ratio,
           max_padded_size_ratio=max_padded_size_ratio, pad_color=pad_color),
      tensor_args=('min_object_covered', 'overlap_thresh', 'random_coef',
                   'min_padded_size_ratio', 'max_padded_size_ratio'))


def _split_crop_result(result, given):
  """Maps a tuple without Nones back onto the `given` layout."""
  values = iter(result)
  return [None if t is None else next(values) for t in given]


def ssd_random_crop_fixed_aspect_ratio(
    image, boxes, labels, label_weights, label_confidences=None,
    multiclass_scores=None, masks=None, keypoints=None,
    min_object_covered=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0), aspect_ratio=1.0,
    area_range=((0.1, 1.0),) * 7,
    overlap_thresh=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
    clip_boxes=(True,) * 7, random_coef=(0.15,) * 7, seed=None):
  """ssd_random_crop with crops of one aspect ratio.

  The SSD crops are sampled at `aspect_ratio`; a final
  random_crop_to_aspect_ratio removes the pixel rounding (and fixes the
  uncropped cases), so the output has exactly that ratio up to one pixel.

  Args:
    As ssd_random_crop, with aspect_ratio (width / height) replacing
    aspect_ratio_range.

  Returns:
    As ssd_random_crop.
  """
  aspect_ratio_range = ((aspect_ratio, aspect_ratio),) * len(area_range)
  given = (image, boxes, labels, label_weights, label_confidences,
           multiclass_scores, masks, keypoints)
  cropped = ssd_random_crop(
      *given, min_object_covered=min_object_covered,
      aspect_ratio_range=aspect_ratio_range, area_range=area_range,
      overlap_thresh=overlap_thresh, clip_boxes=clip_boxes,
      random_coef=random_coef, seed=seed)
  cropped = _split_crop_result(cropped, given)
  # The second crop clips unless clipping is off for every SSD case.
  return random_crop_to_aspect_ratio(
      *cropped, aspect_ratio=aspect_ratio, clip_boxes=any(clip_boxes),
      seed=seed)


def ssd_random_crop_pad_fixed_aspect_ratio(
    image, boxes, labels, label_weights, label_confidences=None,
    multiclass_scores=None, masks=None, keypoints=None,
    min_object_covered=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0), aspect_ratio=1.0,
    aspect_ratio_range=((0.5, 2.0),) * 7, area_range=((0.1, 1.0),) * 7,
    overlap_thresh=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
    clip_boxes=(True,) * 7, random_coef=(0.15,) * 7,
    min_padded_size_ratio=(1.0, 1.0), max_padded_size_ratio=(2.0, 2.0),
    seed=None):
  """ssd_random_crop, then zero padding to a fixed aspect ratio.

  Args:
    As ssd_random_crop, plus aspect_ratio (width / height to pad to) and
    min/max_padded_size_ratio as in random_pad_to_aspect_ratio.

  Returns:
    As ssd_random_crop.
  """
  given = (image, boxes, labels, label_weights, label_confidences,
           multiclass_scores, masks, keypoints)
  cropped = ssd_random_crop(
      *given, min_object_covered=min_object_covered,
      aspect_ratio_range=aspect_ratio_range, area_range=area_range,
      overlap_thresh=overlap_thresh, clip_boxes=clip_boxes,
      random_coef=random_coef, seed=seed)
  (new_image, new_boxes, new_labels, new_weights, new_confidences,
   new_scores, new_masks, new_keypoints) = _split_crop_result(cropped, given)
  padded = random_pad_to_aspect_ratio(
      new_image, new_boxes, masks=new_masks, keypoints=new_keypoints,
      aspect_ratio=aspect_ratio, min_padded_size_ratio=min_padded_size_ratio,
      max_padded_size_ratio=max_padded_size_ratio, seed=seed)
  padded = _split_crop_result(padded, (new_image, new_boxes, new_masks,
                                       new_keypoints))
  return _present(padded[0], padded[1], new_labels, new_weights,
                  new_confidences, new_scores, padded[2], padded[3])


def _get_crop_border(border, size):
  """Divides `border` by the smallest power of two making it <= size / 2."""
  border = tf.cast(border, tf.float32)
  size = tf.cast(size, tf.float32)
  exponent = tf.math.ceil(tf.math.log(2.0 * border / size) / np.log(2.0))
  divisor = tf.cast(tf.clip_by_value(tf.pow(2.0, exponent), 1.0, border),
                    tf.int32)
  return tf.cast(border, tf.int32) // divisor


def _crop_instances_to_frame(window, boxes, labels, label_weights,
                             label_confidences, keypoints):
  """Keeps boxes meeting a window, clipped in its frame (square crops)."""
  new_boxes, keep = _crop_boxes(boxes, window, 0.0, clip_boxes=True)
  labels, label_weights, label_confidences, keypoints = (
      augment_common.gather_per_box(
          keep, (labels, label_weights, label_confidences, keypoints)))
  if keypoints is not None:
    keypoints = _keypoints_to_window(keypoints, window, prune=True)
  return new_boxes, keep, labels, label_weights, label_confidences, keypoints


def random_square_crop_by_scale(image, boxes, labels, label_weights,
                                label_confidences=None, masks=None,
                                keypoints=None, max_border=128, scale_min=0.6,
                                scale_max=1.3, num_scales=8, seed=None):
  """Crops a square whose side is a random scale of the longer image side.

  The crop is centred on a random pixel at least a border away from the
  image edges; parts outside the image are zero-filled (CenterNet style).

  Args:
    image ... keypoints, seed: see the module docstring.
    max_border: largest border in pixels; halved until it is below half of
      each image dimension.
    scale_min: smallest scale.
    scale_max: largest scale.
    num_scales: number of evenly spaced scales in [scale_min, scale_max].

  Returns:
    (image [S, S, C], boxes [M, 4], labels [M], label_weights [M]) then
    label_confidences, masks [M, S, S] and keypoints when given.
  """
  image_shape = tf.shape(image)
  height, width = image_shape[0], image_shape[1]
  scales = tf.linspace(float(scale_min), float(scale_max), num_scales)
  scale = scales[augment_common.random_integer(0, num_scales, seed)]
  size = tf.cast(scale * tf.cast(tf.maximum(height, width), tf.float32),
                 tf.int32)
  h_border = _get_crop_border(max_border, height)
  w_border = _get_crop_border(max_border, width)
  y_center = augment_common.random_integer(h_border, height - h_border + 1,
                                           seed)
  x_center = augment_common.random_integer(w_border, width - w_border + 1,
                                           seed)
  half_size = size // 2
  crop_ymin, crop_xmin = y_center - half_size, x_center - half_size
  # Image part of the square crop, and where it lands inside the output.
  ymin, xmin = tf.maximum(crop_ymin, 0), tf.maximum(crop_xmin, 0)
  ymax = tf.minimum(y_center + half_size, height)
  xmax = tf.minimum(x_center + half_size, width)
  offset_y, offset_x = ymin - crop_ymin, xmin - crop_xmin

  def crop_and_pad(tensor):
    return _pad_to(tensor[..., ymin:ymax, xmin:xmax, :], offset_y, offset_x,
                   size, size)

  new_image = crop_and_pad(image)
  # Output pixel (r, c) shows input pixel (crop_ymin + r, crop_xmin + c).
  window = tf.cast(tf.stack([crop_ymin, crop_xmin, crop_ymin + size,
                             crop_xmin + size]), tf.float32) / tf.cast(
                                 tf.stack([height, width, height, width]),
                                 tf.float32)
  (new_boxes, keep, labels, label_weights, label_confidences,
   keypoints) = _crop_instances_to_frame(window, boxes, labels, label_weights,
                                         label_confidences, keypoints)
  if masks is not None:
    masks = crop_and_pad(tf.gather(masks, keep)[:, :, :, tf.newaxis])[..., 0]
  return _present(new_image, new_boxes, labels, label_weights,
                  label_confidences, masks, keypoints)


def random_scale_crop_and_pad_to_square(
    image, boxes, labels, label_weights, masks=None, keypoints=None,
    label_confidences=None, scale_min=0.1, scale_max=2.0, output_size=512,
    resize_method=tf.image.ResizeMethod.BILINEAR, seed=None):
  """Rescales, randomly crops and zero-pads to an output_size square.

  The image is resized so its longer side is output_size * s with s drawn
  from [scale_min, scale_max); an output_size square is then cut at a random
  offset (only where the scaled image is larger) and padded at the
  bottom / right (EfficientDet style).

  Args:
    image ... label_confidences, seed: see the module docstring.
    scale_min: smallest scale.
    scale_max: largest scale.
    output_size: int, side of the square output.
    resize_method: tf.image.ResizeMethod (TF1 resize semantics).

  Returns:
    (image [output_size, output_size, C], boxes [M, 4], labels [M],
    label_weights [M]) then masks, keypoints and label_confidences when
    given (this op's original order).
  """
  image_shape = tf.shape(image)
  height = tf.cast(image_shape[0], tf.float32)
  width = tf.cast(image_shape[1], tf.float32)
  scale = augment_common.random_uniform_scalar(scale_min, scale_max, seed)
  longest = tf.maximum(height, width)
  scaled_height = tf.cast(scale * output_size * height / longest, tf.int32)
  scaled_width = tf.cast(scale * output_size * width / longest, tf.int32)

  def random_offset(scaled):
    room = tf.maximum(0.0, tf.cast(scaled - output_size, tf.float32))
    return tf.cast(room * augment_common.random_uniform_scalar(seed=seed),
                   tf.int32)

  offset_y, offset_x = random_offset(scaled_height), random_offset(scaled_width)

  def scale_crop_pad(tensor):
    tensor = tf.compat.v1.image.resize_images(
        tensor, tf.stack([scaled_height, scaled_width]), method=resize_method)
    tensor = tensor[..., offset_y:offset_y + output_size,
                    offset_x:offset_x + output_size, :]
    padded = _pad_to(tensor, 0, 0, output_size, output_size)
    padded.set_shape(tensor.shape[:-3].concatenate(
        [output_size, output_size, tensor.shape[-1]]))
    return padded

  new_image = scale_crop_pad(image)
  window = tf.cast(tf.stack([offset_y, offset_x, offset_y + output_size,
                             offset_x + output_size]), tf.float32) / tf.cast(
                                 tf.stack([scaled_height, scaled_width,
                                           scaled_height, scaled_width]),
                                 tf.float32)
  (new_boxes, keep, labels, label_weights, label_confidences,
   keypoints) = _crop_instances_to_frame(window, boxes, labels, label_weights,
                                         label_confidences, keypoints)
  if masks is not None:
    masks = scale_crop_pad(tf.gather(masks, keep)[:, :, :, tf.newaxis])[..., 0]
  return _present(new_image, new_boxes, labels, label_weights, masks,
                  keypoints, label_confidences)
