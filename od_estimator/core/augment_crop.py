"""Random crop augmentations (single image, no batch dimension).

The random_crop_image family: sampled crops, crops to an aspect ratio, a
crop followed by padding, and the SSD-paper variants that draw one of
several crop settings per image. The padding ops and the square
crop-and-pad ops live in augment_pad.

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
import functools
import sys

import tensorflow as tf

from od_estimator.core import augment_common
from od_estimator.core import preprocessor_cache
from od_estimator.core.augment_pad import random_pad_image
from od_estimator.core.augment_pad import random_pad_to_aspect_ratio

_CACHE = preprocessor_cache.PreprocessorCache


def _update_visibilities(keypoints, visibilities):
  """Marks keypoints with a NaN coordinate as not visible."""
  has_nan = tf.reduce_any(tf.math.is_nan(keypoints), axis=2)
  return tf.logical_and(tf.cast(visibilities, tf.bool),
                        tf.logical_not(has_nan))


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


def _sample_crop(image, boxes, min_object_covered, aspect_ratio_range,
                 area_range):
  """Samples a crop window of the image covering part of some box.

  Returns:
    (cropped image, [2 or 3] begin and end pixel offsets of the crop, its
    [4] normalized window).
  """
  # The sampler's seed comes from the graph seed (reproducible under
  # tf.compat.v1.set_random_seed), not from `seed`, which drives the
  # random_coef draw: sharing it would correlate the two.
  sampled = augment_common.sample_distorted_bounding_box(
      image_size=tf.shape(image),
      # Clipped: the sampler must only see the parts inside the image.
      bounding_boxes=tf.clip_by_value(boxes, 0.0, 1.0)[:, tf.newaxis],
      min_object_covered=min_object_covered,
      aspect_ratio_range=aspect_ratio_range, area_range=area_range,
      max_attempts=100, use_image_if_no_bounding_boxes=True)
  begin, size, window = sampled
  end = begin + size
  window = tf.reshape(window, [4])
  new_image = image[begin[0]:end[0], begin[1]:end[1], :]
  new_image.set_shape([None, None, image.shape[2]])
  return new_image, begin, end, window


def _crop_per_box(keep, begin, end, window, clip_boxes, per_box):
  """Keeps the rows `keep` of the per-box tensors and moves them into the crop.

  Args:
    keep: [M] int32 indices of the kept boxes.
    begin, end, window: the crop, from _sample_crop.
    clip_boxes: prune keypoints and DensePose points outside the crop.
    per_box: (labels, label_weights, label_confidences, multiclass_scores,
      masks, mask_weights, keypoints, keypoint_visibilities,
      densepose_num_points, densepose_part_ids, densepose_surface_coords),
      each a tensor or None.

  Returns:
    The per_box tensors, cropped, in the same order.
  """
  (labels, label_weights, label_confidences, multiclass_scores, masks,
   mask_weights, keypoints, keypoint_visibilities, densepose_num_points,
   densepose_part_ids, densepose_surface_coords) = (
       augment_common.gather_per_box(keep, per_box))
  if masks is not None:
    masks = masks[:, begin[0]:end[0], begin[1]:end[1]]
  if keypoints is not None:
    keypoints = augment_common.keypoints_to_window(keypoints, window,
                                                   prune=clip_boxes)
    if keypoint_visibilities is not None and clip_boxes:
      keypoint_visibilities = _update_visibilities(
          keypoints, keypoint_visibilities)
  if densepose_num_points is not None:
    densepose_surface_coords = augment_common.densepose_coords_to_window(
        densepose_surface_coords, window)
    if clip_boxes:
      (densepose_num_points, densepose_part_ids,
       densepose_surface_coords) = _prune_densepose_outside_unit_window(
           densepose_num_points, densepose_part_ids,
           densepose_surface_coords)
  return (labels, label_weights, label_confidences, multiclass_scores, masks,
          mask_weights, keypoints, keypoint_visibilities, densepose_num_points,
          densepose_part_ids, densepose_surface_coords)


def _crop_image(min_object_covered, aspect_ratio_range, area_range,
                overlap_thresh, clip_boxes, image, boxes, *per_box):
  """random_crop_image's crop, always taken; returns what it returns."""
  with tf.name_scope('RandomCropImage'):
    boxes = tf.reshape(boxes, [-1, 4])
    new_image, begin, end, window = _sample_crop(
        image, boxes, min_object_covered, aspect_ratio_range, area_range)
    new_boxes, keep = augment_common.crop_boxes(boxes, window,
                                                overlap_thresh, clip_boxes)
    return augment_common.present(
        new_image, new_boxes,
        *_crop_per_box(keep, begin, end, window, clip_boxes, per_box))


@augment_common.uses_preprocess_vars_cache(_CACHE.CROP_IMAGE)
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

  crop = functools.partial(_crop_image, min_object_covered,
                           aspect_ratio_range, area_range, overlap_thresh,
                           clip_boxes)
  # Skipping the cond when a crop is certain keeps the graph simple.
  if (isinstance(random_coef, (int, float)) and
      random_coef < sys.float_info.min):
    return crop(*inputs)
  do_crop = tf.greater(augment_common.random_uniform_scalar(seed=seed),
                       random_coef)
  return tuple(tf.cond(do_crop, lambda: crop(*inputs),
                       lambda: augment_common.present(*inputs)))


@augment_common.uses_preprocess_vars_cache(_CACHE.CROP_PAD_IMAGE)
def random_crop_pad_image(image, boxes, labels, label_weights,
                          label_confidences=None, multiclass_scores=None,
                          masks=None, keypoints=None,
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
  The original takes neither masks nor keypoints here (they would stay
  behind, unaligned); this version crops and pads them with the image.

  Args:
    image, boxes, labels, label_weights, label_confidences,
      multiclass_scores, masks, keypoints, min_object_covered,
      aspect_ratio_range, area_range, overlap_thresh, clip_boxes,
      random_coef, seed: as random_crop_image.
    min_padded_size_ratio: (height, width) ratios of the smallest output.
    max_padded_size_ratio: (height, width) ratios of the largest output.
    pad_color: [C] float32; defaults to the crop's mean colour.

  Returns:
    (image, boxes [M, 4], labels [M]) then label_weights, label_confidences,
    multiclass_scores, masks [M, h, w] and keypoints when given.
  """
  image_size = tf.cast(tf.shape(image)[:2], tf.float32)
  given = (image, boxes, labels, label_weights, label_confidences,
           multiclass_scores, masks, keypoints)
  cropped = _split_crop_result(random_crop_image(
      image, boxes, labels, label_weights,
      label_confidences=label_confidences,
      multiclass_scores=multiclass_scores, masks=masks, keypoints=keypoints,
      min_object_covered=min_object_covered,
      aspect_ratio_range=aspect_ratio_range, area_range=area_range,
      overlap_thresh=overlap_thresh, clip_boxes=clip_boxes,
      random_coef=random_coef, seed=seed), given)
  new_image, new_boxes, new_masks, new_keypoints = _split_crop_result(
      random_pad_image(
          cropped[0], cropped[1], masks=cropped[6], keypoints=cropped[7],
          min_image_size=tf.cast(image_size * min_padded_size_ratio,
                                 tf.int32),
          max_image_size=tf.cast(image_size * max_padded_size_ratio,
                                 tf.int32),
          pad_color=pad_color, seed=seed),
      (cropped[0], cropped[1], cropped[6], cropped[7]))
  return augment_common.present(new_image, new_boxes, *cropped[2:6],
                                new_masks, new_keypoints)


@augment_common.uses_preprocess_vars_cache(_CACHE.CROP_TO_ASPECT_RATIO)
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

    new_boxes, keep = augment_common.crop_boxes(boxes, window, overlap_thresh,
                                                clip_boxes)
    (labels, label_weights, label_confidences, multiclass_scores, masks,
     keypoints) = augment_common.gather_per_box(
         keep, (labels, label_weights, label_confidences, multiclass_scores,
                masks, keypoints))
    if masks is not None:
      masks = tf.slice(masks, tf.stack([0, offset_height, offset_width]),
                       tf.stack([-1, target_height, target_width]))
    if keypoints is not None:
      keypoints = augment_common.keypoints_to_window(keypoints, window,
                                                     prune=clip_boxes)
    return augment_common.present(new_image, new_boxes, labels, label_weights,
                                  label_confidences, multiclass_scores, masks,
                                  keypoints)


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


@augment_common.uses_preprocess_vars_cache(_CACHE.SSD_CROP_SELECTOR_ID)
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


@augment_common.uses_preprocess_vars_cache(_CACHE.SSD_CROP_PAD_SELECTOR_ID)
def ssd_random_crop_pad(image, boxes, labels, label_weights,
                        label_confidences=None, multiclass_scores=None,
                        masks=None, keypoints=None,
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
      multiclass_scores, masks, keypoints, seed: as random_crop_pad_image
      (masks and keypoints are this version's addition, as there).
    min_object_covered, aspect_ratio_range, area_range, overlap_thresh,
      clip_boxes, random_coef, min_padded_size_ratio, max_padded_size_ratio,
      pad_color: per-case values of the random_crop_pad_image arguments.

  Returns:
    (image, boxes, labels) then label_weights, label_confidences,
    multiclass_scores, masks and keypoints when given.
  """
  def crop_pad(*inputs, **case_args):
    return random_crop_pad_image(*inputs, seed=seed, **case_args)

  return _run_random_case(
      crop_pad, (image, boxes, labels, label_weights, label_confidences,
                 multiclass_scores, masks, keypoints),
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


@augment_common.uses_preprocess_vars_cache(_CACHE.SSD_CROP_FIXED_ASPECT_RATIO)
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


@augment_common.uses_preprocess_vars_cache(_CACHE.SSD_CROP_PAD_FIXED_ASPECT_RATIO)
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
  return augment_common.present(padded[0], padded[1], new_labels,
                                new_weights, new_confidences, new_scores,
                                padded[2], padded[3])
