"""Draws detections (boxes, labels, scores, masks, keypoints) on images.

Numpy/Pillow only, so it works inside and outside TF graphs. The `*_array`
functions take a uint8 [height, width, 3] numpy image, draw on it in place
(as the original API does) and also return it; the others take a PIL image.
Boxes are ymin, xmin, ymax, xmax, normalized to [0, 1] unless
use_normalized_coordinates=False says they are pixels.
"""
import collections
import functools
import io

import numpy as np
from PIL import Image
from PIL import ImageColor
from PIL import ImageDraw
from PIL import ImageFont

from od_estimator.utils import file_safety

# Box colors are picked by class id (modulo the list length), as in the
# original, so a class keeps its color across images and tools.
STANDARD_COLORS = [
    'AliceBlue', 'Chartreuse', 'Aqua', 'Aquamarine', 'Azure', 'Beige', 'Bisque',
    'BlanchedAlmond', 'BlueViolet', 'BurlyWood', 'CadetBlue', 'AntiqueWhite',
    'Chocolate', 'Coral', 'CornflowerBlue', 'Cornsilk', 'Crimson', 'Cyan',
    'DarkCyan', 'DarkGoldenRod', 'DarkGrey', 'DarkKhaki', 'DarkOrange',
    'DarkOrchid', 'DarkSalmon', 'DarkSeaGreen', 'DarkTurquoise', 'DarkViolet',
    'DeepPink', 'DeepSkyBlue', 'DodgerBlue', 'FireBrick', 'FloralWhite',
    'ForestGreen', 'Fuchsia', 'Gainsboro', 'GhostWhite', 'Gold', 'GoldenRod',
    'Salmon', 'Tan', 'HoneyDew', 'HotPink', 'IndianRed', 'Ivory', 'Khaki',
    'Lavender', 'LavenderBlush', 'LawnGreen', 'LemonChiffon', 'LightBlue',
    'LightCoral', 'LightCyan', 'LightGoldenRodYellow', 'LightGray', 'LightGrey',
    'LightGreen', 'LightPink', 'LightSalmon', 'LightSeaGreen', 'LightSkyBlue',
    'LightSlateGray', 'LightSlateGrey', 'LightSteelBlue', 'LightYellow', 'Lime',
    'LimeGreen', 'Linen', 'Magenta', 'MediumAquaMarine', 'MediumOrchid',
    'MediumPurple', 'MediumSeaGreen', 'MediumSlateBlue', 'MediumSpringGreen',
    'MediumTurquoise', 'MediumVioletRed', 'MintCream', 'MistyRose', 'Moccasin',
    'NavajoWhite', 'OldLace', 'Olive', 'OliveDrab', 'Orange', 'OrangeRed',
    'Orchid', 'PaleGoldenRod', 'PaleGreen', 'PaleTurquoise', 'PaleVioletRed',
    'PapayaWhip', 'PeachPuff', 'Peru', 'Pink', 'Plum', 'PowderBlue', 'Purple',
    'Red', 'RosyBrown', 'RoyalBlue', 'SaddleBrown', 'Green', 'SandyBrown',
    'SeaGreen', 'SeaShell', 'Sienna', 'Silver', 'SkyBlue', 'SlateBlue',
    'SlateGray', 'SlateGrey', 'Snow', 'SpringGreen', 'SteelBlue', 'GreenYellow',
    'Teal', 'Thistle', 'Tomato', 'Turquoise', 'Violet', 'Wheat', 'White',
    'WhiteSmoke', 'Yellow', 'YellowGreen'
]
_FONT_SIZE = 24
_TEXT_MARGIN = 0.05  # Of the text height, above and below each label line.


def _get_multiplier_for_color_randomness():
  """A prime p in 5..17 not dividing len(STANDARD_COLORS), nearest len / 10.

  (p * track_id) % len(STANDARD_COLORS) then gives successive track ids
  well separated colors; 1 when no candidate qualifies.
  """
  num_colors = len(STANDARD_COLORS)
  candidates = [p for p in (5, 7, 11, 13, 17) if num_colors % p]
  if not candidates:
    return 1
  return min(candidates, key=lambda p: abs(num_colors / 10. - p))


@functools.lru_cache(maxsize=1)
def label_font_size(width, height):
  """Label font size in points for an image of that many pixels.

  24 points (the original's fixed size) on a 640 x 480 image, in proportion
  to the image's geometric-mean side elsewhere, and never below 8, so labels
  neither swamp a thumbnail nor vanish on a large photo.
  """
  scale = np.sqrt(width * height / (640. * 480.))
  return max(8, int(round(_FONT_SIZE * scale)))


def _font(size=_FONT_SIZE):
  for name in ('arial.ttf', 'DejaVuSans.ttf'):
    try:
      return ImageFont.truetype(name, size)
    except OSError:
      continue
  return ImageFont.load_default(size)


def label_position(left, top, label_width, label_height, image_width,
                   image_height):
  """Where a box's label block goes so that no part of it leaves the image.

  Above the box when it fits there, else just inside the box's top edge;
  shifted left when it would pass the right edge, and kept inside the image
  in any case.

  Args:
    left: the box's left edge in pixels.
    top: the box's top edge in pixels.
    label_width: width of the label block in pixels.
    label_height: height of the label block in pixels.
    image_width: the image's width in pixels.
    image_height: the image's height in pixels.

  Returns:
    (x, bottom): the block's left edge and its bottom edge, in pixels.
  """
  x = max(0., min(float(left), image_width - float(label_width)))
  if top >= label_height:
    bottom = float(top)
  else:
    bottom = max(float(top), 0.) + label_height
  return x, min(bottom, float(image_height))


def _text_size(font, text):
  left, top, right, bottom = font.getbbox(text)
  del left, top  # Sizes are measured from the drawing origin, like getsize.
  return right, bottom


def save_image_array_as_png(image, output_path):
  """Writes a [height, width, 3] numpy image as a PNG file (any gfile path).

  An existing file is replaced in one step (see file_safety.write_file).
  """
  file_safety.write_file(output_path, encode_image_array_as_png_str(image))


def encode_image_array_as_png_str(image):
  """Returns the PNG bytes of a [height, width, 3] numpy image."""
  buffer = io.BytesIO()
  Image.fromarray(np.uint8(image)).convert('RGB').save(buffer, format='PNG')
  return buffer.getvalue()


def _copy_back(image, image_pil):
  np.copyto(image, np.asarray(image_pil).astype(image.dtype))
  return image


def draw_bounding_box_on_image_array(image, ymin, xmin, ymax, xmax,
                                     color='red', thickness=4,
                                     display_str_list=(),
                                     use_normalized_coordinates=True):
  """Draws one box, with label lines, on a numpy image in place.

  Args:
    image: uint8 [height, width, 3] numpy array.
    ymin: top of the box.
    xmin: left of the box.
    ymax: bottom of the box.
    xmax: right of the box.
    color: PIL color name or RGB tuple of the box and the label background.
    thickness: line width in pixels; 0 draws the labels only.
    display_str_list: strings shown one per line above the box (inside it
      when there is no room above), always inside the image.
    use_normalized_coordinates: coordinates are fractions of the image size
      rather than pixels.

  Returns:
    `image`, drawn on.
  """
  image_pil = Image.fromarray(np.uint8(image)).convert('RGB')
  draw_bounding_box_on_image(image_pil, ymin, xmin, ymax, xmax, color,
                             thickness, display_str_list,
                             use_normalized_coordinates)
  return _copy_back(image, image_pil)


def draw_bounding_box_on_image(image, ymin, xmin, ymax, xmax, color='red',
                               thickness=4, display_str_list=(),
                               use_normalized_coordinates=True):
  """Draws one box, with label lines, on a PIL image.

  Each edge is a band `thickness` pixels wide centred on the edge's pixel
  coordinate (rounded): rows round(y) - thickness // 2 .. + thickness - 1 for
  a horizontal edge, likewise for columns. Horizontal bands span the full
  width of the vertical ones, so corners are square.

  Args:
    image: PIL.Image in RGB mode.
    ymin: top of the box.
    xmin: left of the box.
    ymax: bottom of the box.
    xmax: right of the box.
    color: PIL color name or RGB tuple.
    thickness: line width in pixels; 0 draws the labels only.
    display_str_list: label lines, black text on `color`.
    use_normalized_coordinates: coordinates are fractions of the image size.
  """
  draw = ImageDraw.Draw(image)
  width, height = image.size
  if use_normalized_coordinates:
    ymin, ymax, xmin, xmax = (ymin * height, ymax * height, xmin * width,
                              xmax * width)
  top, bottom = sorted((float(ymin), float(ymax)))
  left, right = sorted((float(xmin), float(xmax)))
  if thickness > 0:
    def band(value):
      start = int(round(value)) - thickness // 2
      return start, start + thickness - 1
    top0, top1 = band(top)
    bottom0, bottom1 = band(bottom)
    left0, left1 = band(left)
    right0, right1 = band(right)
    for rect in ((left0, top0, right1, top1), (left0, bottom0, right1, bottom1),
                 (left0, top0, left1, bottom1), (right0, top0, right1, bottom1)):
      draw.rectangle(rect, fill=color)
  if not display_str_list:
    return
  font = _font(label_font_size(width, height))
  sizes = [_text_size(font, text) for text in display_str_list]
  margins = [np.ceil(_TEXT_MARGIN * h) for _, h in sizes]
  total_height = sum(h + 2 * m for (_, h), m in zip(sizes, margins))
  total_width = max(w + 2 * m for (w, _), m in zip(sizes, margins))
  text_left, text_bottom = label_position(left, top, total_width,
                                          total_height, width, height)
  for text, (text_width, text_height), margin in zip(
      display_str_list[::-1], sizes[::-1], margins[::-1]):
    text_top = text_bottom - text_height - 2 * margin
    draw.rectangle([(text_left, text_top),
                    (text_left + text_width + 2 * margin, text_bottom)],
                   fill=color)
    draw.text((text_left + margin, text_top + margin), text, fill='black',
              font=font)
    text_bottom = text_top


def draw_bounding_boxes_on_image_array(image, boxes, color='red', thickness=4,
                                       display_str_list_list=()):
  """Draws boxes on a numpy image in place.

  Args:
    image: uint8 [height, width, 3] numpy array.
    boxes: [N, 4] normalized ymin, xmin, ymax, xmax.
    color: color of every box.
    thickness: line width in pixels.
    display_str_list_list: optional list of N lists of label strings.

  Returns:
    `image`, drawn on.

  Raises:
    ValueError: if boxes is not [N, 4].
  """
  image_pil = Image.fromarray(np.uint8(image)).convert('RGB')
  draw_bounding_boxes_on_image(image_pil, boxes, color, thickness,
                               display_str_list_list)
  return _copy_back(image, image_pil)


def draw_bounding_boxes_on_image(image, boxes, color='red', thickness=4,
                                 display_str_list_list=()):
  """Draws boxes on a PIL image; see draw_bounding_boxes_on_image_array.

  Raises:
    ValueError: if boxes is not [N, 4].
  """
  boxes = np.asarray(boxes)
  if boxes.size == 0 and boxes.ndim <= 2:
    return
  if boxes.ndim != 2 or boxes.shape[1] != 4:
    raise ValueError('boxes must be [N, 4] ymin, xmin, ymax, xmax; got shape '
                     '%s.' % (boxes.shape,))
  for i, box in enumerate(boxes):
    labels = display_str_list_list[i] if len(display_str_list_list) else ()
    draw_bounding_box_on_image(image, box[0], box[1], box[2], box[3], color,
                               thickness, labels)


def draw_keypoints_on_image_array(image, keypoints, keypoint_scores=None,
                                  min_score_thresh=0.5, color='red', radius=2,
                                  use_normalized_coordinates=True,
                                  keypoint_edges=None,
                                  keypoint_edge_color='green',
                                  keypoint_edge_width=2):
  """Draws keypoints (and edges between them) on a numpy image in place.

  Args:
    image: uint8 [height, width, 3] numpy array.
    keypoints: [K, 2] y, x.
    keypoint_scores: optional [K]; only keypoints scoring above
      min_score_thresh are drawn. Without it, keypoints with a NaN are
      skipped.
    min_score_thresh: see keypoint_scores.
    color: dot color.
    radius: dot radius in pixels.
    use_normalized_coordinates: keypoints are fractions of the image size.
    keypoint_edges: optional list of (start, end) keypoint indices to join.
    keypoint_edge_color: edge color.
    keypoint_edge_width: edge width in pixels.

  Returns:
    `image`, drawn on.
  """
  image_pil = Image.fromarray(np.uint8(image)).convert('RGB')
  draw_keypoints_on_image(image_pil, keypoints, keypoint_scores,
                          min_score_thresh, color, radius,
                          use_normalized_coordinates, keypoint_edges,
                          keypoint_edge_color, keypoint_edge_width)
  return _copy_back(image, image_pil)


def draw_keypoints_on_image(image, keypoints, keypoint_scores=None,
                            min_score_thresh=0.5, color='red', radius=2,
                            use_normalized_coordinates=True,
                            keypoint_edges=None, keypoint_edge_color='green',
                            keypoint_edge_width=2):
  """Draws keypoints on a PIL image; see draw_keypoints_on_image_array."""
  draw = ImageDraw.Draw(image)
  keypoints = np.asarray(keypoints, dtype=np.float64).reshape([-1, 2])
  points = keypoints[:, ::-1].copy()  # x, y
  if use_normalized_coordinates:
    points *= np.array(image.size, dtype=np.float64)
  if keypoint_scores is not None:
    valid = np.asarray(keypoint_scores).reshape([-1]) > min_score_thresh
  else:
    valid = ~np.any(np.isnan(keypoints), axis=1)
  for (x, y), ok in zip(points, valid):
    if ok:
      draw.ellipse([(x - radius, y - radius), (x + radius, y + radius)],
                   outline=color, fill=color)
  for start, end in keypoint_edges or ():
    if not (0 <= start < len(points) and 0 <= end < len(points)):
      continue
    if valid[start] and valid[end]:
      draw.line([tuple(points[start]), tuple(points[end])],
                fill=keypoint_edge_color, width=keypoint_edge_width)


def draw_mask_on_image_array(image, mask, color='red', alpha=0.4):
  """Tints the pixels of a mask on a numpy image in place.

  Args:
    image: uint8 [height, width, 3] numpy array.
    mask: uint8 [height, width], nonzero inside the mask.
    color: tint color.
    alpha: tint opacity in [0, 1].

  Returns:
    `image`, drawn on.

  Raises:
    ValueError: for non-uint8 inputs or a mask of another size.
  """
  if image.dtype != np.uint8:
    raise ValueError('image must be uint8, got %s.' % image.dtype)
  if mask.dtype != np.uint8:
    raise ValueError('mask must be uint8, got %s.' % mask.dtype)
  if image.shape[:2] != mask.shape:
    raise ValueError('The image has spatial dimensions %s but the mask has '
                     'dimensions %s.' % (image.shape[:2], mask.shape))
  # Opacity quantized to 8 bits, as an alpha channel would store it.
  weight = np.floor(255.0 * alpha) / 255.0
  rgb = np.array(ImageColor.getrgb(color)[:3], dtype=np.float64)
  inside = mask > 0
  blended = image[inside] * (1.0 - weight) + rgb * weight
  image[inside] = np.round(blended).astype(np.uint8)
  return image


def _display_string(class_name, score, track_id, skip_scores, skip_labels,
                    skip_track_ids):
  """'name: 87%' plus ': ID 3' for tracks; parts dropped by the skip_ flags."""
  parts = []
  if not skip_labels and class_name is not None:
    parts.append(str(class_name))
  if not skip_scores:
    parts.append('%d%%' % int(round(100 * float(score))))
  if not skip_track_ids and track_id is not None:
    parts.append('ID %s' % track_id)
  return ': '.join(parts)


def visualize_boxes_and_labels_on_image_array(
    image, boxes, classes, scores, category_index, instance_masks=None,
    instance_boundaries=None, keypoints=None, keypoint_scores=None,
    keypoint_edges=None, track_ids=None, use_normalized_coordinates=False,
    max_boxes_to_draw=20, min_score_thresh=.5, agnostic_mode=False,
    line_thickness=4, mask_alpha=.4,
    groundtruth_box_visualization_color='black', skip_boxes=False,
    skip_scores=False, skip_labels=False, skip_track_ids=False):
  """Draws scored, labelled detections on a numpy image in place.

  Detections with the same box are drawn once with one label line each.
  Boxes are taken in the given order (highest score first, as models output
  them) until max_boxes_to_draw distinct boxes are drawn.

  Args:
    image: uint8 [height, width, 3] numpy array.
    boxes: [N, 4] ymin, xmin, ymax, xmax.
    classes: [N] 1-based class ids, the keys of category_index.
    scores: [N], or None for groundtruth: then every box is drawn in
      groundtruth_box_visualization_color without labels.
    category_index: {id: {'id': id, 'name': name}}; unknown ids are shown
      as 'N/A'.
    instance_masks: optional uint8 [N, height, width].
    instance_boundaries: optional uint8 [N, height, width], drawn opaque red.
    keypoints: optional [N, K, 2] y, x.
    keypoint_scores: optional [N, K].
    keypoint_edges: optional list of (start, end) keypoint index pairs.
    track_ids: optional [N] ints; when given they pick the box colors.
    use_normalized_coordinates: boxes and keypoints are fractions of the
      image size rather than pixels.
    max_boxes_to_draw: most distinct boxes drawn; None or 0 draws all.
    min_score_thresh: boxes (and keypoints) need a score above this.
    agnostic_mode: show scores only, every box in DarkOrange.
    line_thickness: box line width in pixels.
    mask_alpha: instance mask opacity.
    groundtruth_box_visualization_color: box color when scores is None.
    skip_boxes: draw labels, masks and keypoints without the box lines.
    skip_scores: leave the score out of the labels.
    skip_labels: leave the class name out of the labels.
    skip_track_ids: leave the track id out of the labels.

  Returns:
    `image`, drawn on: uint8 [height, width, 3].
  """
  boxes = np.asarray(boxes).reshape([-1, 4])
  display_strs = collections.defaultdict(list)
  colors = collections.OrderedDict()
  indices = collections.defaultdict(list)
  max_boxes_to_draw = max_boxes_to_draw or boxes.shape[0]
  for i in range(boxes.shape[0]):
    if len(colors) == max_boxes_to_draw:
      break
    if scores is not None and not scores[i] > min_score_thresh:
      continue
    box = tuple(boxes[i].tolist())
    indices[box].append(i)
    if scores is None:
      colors[box] = groundtruth_box_visualization_color
      continue
    class_id = int(classes[i])
    class_name = None
    if not agnostic_mode:
      class_name = category_index.get(class_id, {'name': 'N/A'})['name']
    track_id = None if track_ids is None else track_ids[i]
    display_strs[box].append(_display_string(
        class_name, scores[i], track_id, skip_scores, skip_labels,
        skip_track_ids))
    if agnostic_mode:
      colors[box] = 'DarkOrange'
    elif track_ids is not None:
      colors[box] = STANDARD_COLORS[
          (_get_multiplier_for_color_randomness() * int(track_ids[i])) %
          len(STANDARD_COLORS)]
    else:
      colors[box] = STANDARD_COLORS[class_id % len(STANDARD_COLORS)]

  for box, color in colors.items():
    i = indices[box][-1]  # The last detection's mask wins for shared boxes.
    if instance_masks is not None:
      draw_mask_on_image_array(image, instance_masks[i], color=color,
                               alpha=mask_alpha)
    if instance_boundaries is not None:
      draw_mask_on_image_array(image, instance_boundaries[i], color='red',
                               alpha=1.0)
    draw_bounding_box_on_image_array(
        image, box[0], box[1], box[2], box[3], color=color,
        thickness=0 if skip_boxes else line_thickness,
        display_str_list=display_strs[box],
        use_normalized_coordinates=use_normalized_coordinates)
    if keypoints is not None:
      # Keypoints of every detection sharing the box are drawn.
      box_keypoints = np.concatenate(
          [np.reshape(keypoints[j], [-1, 2]) for j in indices[box]])
      box_keypoint_scores = None
      if keypoint_scores is not None:
        box_keypoint_scores = np.concatenate(
            [np.reshape(keypoint_scores[j], [-1]) for j in indices[box]])
      draw_keypoints_on_image_array(
          image, box_keypoints, box_keypoint_scores,
          min_score_thresh=min_score_thresh, color=color,
          radius=line_thickness / 2,
          use_normalized_coordinates=use_normalized_coordinates,
          keypoint_edges=keypoint_edges, keypoint_edge_color=color,
          keypoint_edge_width=line_thickness // 2)
  return image

