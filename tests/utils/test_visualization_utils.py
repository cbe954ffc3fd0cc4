"""visualization_utils: boxes at hand-computed pixels, labels, filtering."""
import io

import numpy as np
from PIL import Image
import pytest

from od_estimator.utils import visualization_utils

RED = (255, 0, 0)
CHARTREUSE = (127, 255, 0)  # STANDARD_COLORS[1]: the color of class 1.
CATEGORY_INDEX = {1: {'id': 1, 'name': 'cat'}, 2: {'id': 2, 'name': 'dog'}}


def _frame(height, width, top, bottom, left, right, thickness):
  """Reference mask of a box frame: bands of `thickness` rows/columns
  starting thickness // 2 before each (integer) edge coordinate."""
  half = thickness // 2
  rows = np.arange(height)[:, None]
  cols = np.arange(width)[None, :]
  in_rows = (rows >= top - half) & (rows <= bottom - half + thickness - 1)
  in_cols = (cols >= left - half) & (cols <= right - half + thickness - 1)
  on_top = (rows >= top - half) & (rows < top - half + thickness)
  on_bottom = (rows >= bottom - half) & (rows < bottom - half + thickness)
  on_left = (cols >= left - half) & (cols < left - half + thickness)
  on_right = (cols >= right - half) & (cols < right - half + thickness)
  return ((on_top | on_bottom) & in_cols) | ((on_left | on_right) & in_rows)


def test_box_drawn_at_known_pixels():
  image = np.zeros([20, 30, 3], np.uint8)
  # Normalized [0.25, 0.2, 0.75, 0.8] on 20x30: top 0.25 * 20 = 5,
  # bottom 0.75 * 20 = 15, left 0.2 * 30 = 6, right 0.8 * 30 = 24.
  result = visualization_utils.draw_bounding_boxes_on_image_array(
      image, np.array([[0.25, 0.2, 0.75, 0.8]]), color='red', thickness=2)
  assert result is image  # Drawn in place, and returned.
  expected = np.zeros([20, 30, 3], np.uint8)
  expected[_frame(20, 30, top=5, bottom=15, left=6, right=24,
                  thickness=2)] = RED
  # Thickness 2: rows 4-5 and 14-15, columns 5-6 and 23-24.
  assert image[4, 10].tolist() == list(RED)
  assert image[5, 10].tolist() == list(RED)
  assert image[6, 10].tolist() == [0, 0, 0]
  assert image[10, 5].tolist() == list(RED)
  assert image[10, 7].tolist() == [0, 0, 0]
  np.testing.assert_array_equal(image, expected)


def test_box_in_pixel_coordinates():
  image = np.zeros([10, 10, 3], np.uint8)
  visualization_utils.draw_bounding_box_on_image_array(
      image, 2, 3, 7, 8, color='red', thickness=1,
      use_normalized_coordinates=False)
  expected = np.zeros([10, 10, 3], np.uint8)
  # Thickness 1: exactly rows 2 and 7 (columns 3..8), columns 3 and 8.
  expected[[2, 7], 3:9] = RED
  expected[2:8, [3, 8]] = RED
  np.testing.assert_array_equal(image, expected)


def test_no_boxes_leaves_image_unchanged():
  image = np.full([8, 8, 3], 9, np.uint8)
  visualization_utils.draw_bounding_boxes_on_image_array(
      image, np.zeros([0, 4], np.float32))
  visualization_utils.visualize_boxes_and_labels_on_image_array(
      image, np.zeros([0, 4]), np.zeros([0], np.int64), np.zeros([0]),
      CATEGORY_INDEX, use_normalized_coordinates=True)
  np.testing.assert_array_equal(image, np.full([8, 8, 3], 9, np.uint8))


def test_bad_box_shape_raises():
  with pytest.raises(ValueError, match=r'\[N, 4\]'):
    visualization_utils.draw_bounding_boxes_on_image_array(
        np.zeros([8, 8, 3], np.uint8), np.zeros([2, 3]))


def test_min_score_thresh_filters_and_colors_by_class():
  image = np.zeros([80, 40, 3], np.uint8)
  # Tops at 0.5 * 80 = 40 leave room for the labels above (rows < 40), so
  # rows 41+ hold only the box lines.
  boxes = np.array([[0.5, 0.1, 0.9, 0.4],    # rows 40..72, cols 4..16
                    [0.5, 0.6, 0.9, 0.9]])   # rows 40..72, cols 24..36
  visualization_utils.visualize_boxes_and_labels_on_image_array(
      image, boxes, np.array([1, 2]), np.array([0.9, 0.4]), CATEGORY_INDEX,
      use_normalized_coordinates=True, line_thickness=2,
      min_score_thresh=0.5)
  frame = _frame(80, 40, top=40, bottom=72, left=4, right=16, thickness=2)
  lower = np.broadcast_to(np.arange(80)[:, None] >= 41, [80, 40])
  np.testing.assert_array_equal(image[frame & lower],
                                np.tile(CHARTREUSE, [(frame & lower).sum(), 1]))
  # The 0.4 box is below the threshold: nothing else drawn down there.
  assert not image[lower & ~frame].any()


def test_labels_name_and_percent(monkeypatch):
  drawn = []
  monkeypatch.setattr(
      visualization_utils, 'draw_bounding_box_on_image_array',
      lambda image, *box, **kwargs: drawn.append(
          (box, kwargs['color'], list(kwargs['display_str_list']))))
  boxes = np.array([[0.1, 0.1, 0.5, 0.5], [0.1, 0.1, 0.5, 0.5],
                    [0.6, 0.6, 0.9, 0.9], [0.2, 0.2, 0.3, 0.3]])
  visualization_utils.visualize_boxes_and_labels_on_image_array(
      np.zeros([10, 10, 3], np.uint8), boxes, np.array([1, 2, 7, 1]),
      np.array([0.87, 0.6, 0.556, 0.5]), CATEGORY_INDEX,
      use_normalized_coordinates=True)
  # Same box twice: one box with two lines, colored by the last class
  # (2 -> Aqua). Class 7 is not in the index: 'N/A', STANDARD_COLORS[7];
  # 0.556 -> 55.6 -> 56%. Score 0.5 is not above min_score_thresh 0.5.
  assert drawn == [
      ((0.1, 0.1, 0.5, 0.5), 'Aqua', ['cat: 87%', 'dog: 60%']),
      ((0.6, 0.6, 0.9, 0.9), 'BlanchedAlmond', ['N/A: 56%']),
  ]


def test_label_options_and_groundtruth(monkeypatch):
  drawn = []
  monkeypatch.setattr(
      visualization_utils, 'draw_bounding_box_on_image_array',
      lambda image, *box, **kwargs: drawn.append(
          (kwargs['color'], kwargs['thickness'],
           list(kwargs['display_str_list']))))
  image = np.zeros([10, 10, 3], np.uint8)
  boxes = np.array([[0.1, 0.1, 0.5, 0.5], [0.6, 0.6, 0.9, 0.9]])
  classes, scores = np.array([1, 2]), np.array([0.9, 0.8])
  visualization_utils.visualize_boxes_and_labels_on_image_array(
      image, boxes, classes, scores, CATEGORY_INDEX, agnostic_mode=True)
  visualization_utils.visualize_boxes_and_labels_on_image_array(
      image, boxes, classes, scores, CATEGORY_INDEX, skip_scores=True,
      skip_boxes=True, max_boxes_to_draw=1)
  visualization_utils.visualize_boxes_and_labels_on_image_array(
      image, boxes, classes, None, CATEGORY_INDEX)
  # Track id 3: color index (13 * 3) % 126 = 39 -> 'Salmon'.
  visualization_utils.visualize_boxes_and_labels_on_image_array(
      image, boxes[:1], classes[:1], scores[:1], CATEGORY_INDEX,
      track_ids=np.array([3]))
  assert drawn == [
      ('DarkOrange', 4, ['90%']), ('DarkOrange', 4, ['80%']),
      ('Chartreuse', 0, ['cat']),
      ('black', 4, []), ('black', 4, []),
      ('Salmon', 4, ['cat: 90%: ID 3']),
  ]


def test_color_multiplier():
  # 126 colors = 2 * 3^2 * 7: candidates 5, 11, 13, 17; nearest 12.6 is 13.
  assert len(visualization_utils.STANDARD_COLORS) == 126
  assert visualization_utils._get_multiplier_for_color_randomness() == 13


def test_labels_are_drawn_above_the_box():
  image = np.zeros([60, 80, 3], np.uint8)
  visualization_utils.draw_bounding_box_on_image_array(
      image, 50, 10, 58, 70, color='red', thickness=0,
      display_str_list=['cat: 87%'], use_normalized_coordinates=False)
  # Thickness 0 draws no lines; the red label background sits above row 50
  # from column 10 on.
  assert image[:50, 10:].any()
  assert not image[51:].any()
  assert not image[:, :10].any()


def test_mask_blending():
  image = np.full([2, 2, 3], 100, np.uint8)
  mask = np.array([[1, 0], [0, 0]], np.uint8)
  visualization_utils.draw_mask_on_image_array(image, mask, color='red',
                                               alpha=0.4)
  # Weight floor(255 * 0.4) / 255 = 102 / 255; red channel
  # 100 * (153 / 255) + 255 * (102 / 255) = 60 + 102 = 162, others 60.
  assert image[0, 0].tolist() == [162, 60, 60]
  assert image[1, 1].tolist() == [100, 100, 100]
  with pytest.raises(ValueError, match='spatial dimensions'):
    visualization_utils.draw_mask_on_image_array(
        image, np.zeros([3, 2], np.uint8))
  with pytest.raises(ValueError, match='uint8'):
    visualization_utils.draw_mask_on_image_array(
        image, np.zeros([2, 2], np.float32))


def test_keypoints():
  image = np.zeros([10, 10, 3], np.uint8)
  # (y, x) = (0.5, 0.5) -> pixel (5, 5); a radius 1 disk is that pixel and
  # its 4 neighbours. The second keypoint scores below the threshold.
  visualization_utils.draw_keypoints_on_image_array(
      image, np.array([[0.5, 0.5], [0.2, 0.2]]),
      keypoint_scores=np.array([0.9, 0.1]), radius=1)
  expected = np.zeros([10, 10, 3], np.uint8)
  expected[[4, 5, 5, 5, 6], [5, 4, 5, 6, 5]] = RED
  np.testing.assert_array_equal(image, expected)


def test_png_encoding_round_trip(tmp_path):
  image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape([2, 3, 3])
  decoded = np.array(Image.open(io.BytesIO(
      visualization_utils.encode_image_array_as_png_str(image))))
  np.testing.assert_array_equal(decoded, image)
  path = str(tmp_path / 'x.png')
  visualization_utils.save_image_array_as_png(image, path)
  np.testing.assert_array_equal(np.array(Image.open(path)), image)


def test_label_font_scales_with_the_image():
  assert visualization_utils.label_font_size(640, 480) == 24
  assert visualization_utils.label_font_size(1280, 960) == 48
  assert visualization_utils.label_font_size(64, 64) == 8


@pytest.mark.parametrize('box, expected', [
    # Room above the box: the label sits on its top edge.
    ((50, 40), (50, 40)),
    # A box touching the top edge: the label goes inside it.
    ((50, 0), (50, 20)),
    # A box near the right edge: the label shifts left to stay inside.
    ((90, 40), (70, 40)),
    # A box above the image (clipped coordinates): still inside the image.
    ((-5, -30), (0, 20)),
])
def test_label_position_stays_inside_the_image(box, expected):
  left, top = box
  assert visualization_utils.label_position(
      left, top, label_width=30, label_height=20, image_width=100,
      image_height=80) == expected


def test_label_of_a_box_at_the_corner_is_drawn_whole():
  """A box filling the image: its label is inside it, not cut at the edge."""
  image = np.zeros([60, 80, 3], np.uint8)
  visualization_utils.draw_bounding_box_on_image_array(
      image, 0.0, 0.0, 1.0, 1.0, color=(0, 255, 0), thickness=0,
      display_str_list=['circle: 99%'])
  drawn_rows = np.flatnonzero((image[:, :, 1] == 255).any(axis=1))
  # The label background starts at the top row and ends inside the image.
  assert drawn_rows[0] == 0 and 0 < drawn_rows[-1] < 59
