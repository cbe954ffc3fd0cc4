"""The evaluation report's pictures, drawn with Pillow: precision-recall
curves per class, the confusion matrix, and a grid of images.

Each function returns a PIL image; the report saves them as PNG files.
"""
import math

import numpy as np
from PIL import Image
from PIL import ImageDraw
from PIL import ImageFont

_WHITE = (255, 255, 255)
_BLACK = (0, 0, 0)
_GREY = (200, 200, 200)
_CURVE = (31, 119, 180)
_PLOT = (260, 220)  # One class's curve: width, height.
_MARGIN = 32  # Room for the axes' labels.
_CELL = 48  # One cell of the confusion matrix.
TILE = 256  # The longer side of an image in image_grid.
GRID_COLUMNS = 4
_CAPTION_HEIGHT = 16  # Under each image of image_grid.


def _font():
  return ImageFont.load_default()


def _text_width(draw, text, font):
  left, _, right, _ = draw.textbbox((0, 0), text, font=font)
  return right - left


def precision_recall_curves(curves, titles, columns=3):
  """One small plot per class: precision (up) against recall (across).

  Args:
    curves: [(precision [K], recall [K])] in plotting order.
    titles: a title per curve (e.g. 'cat  AP 0.812').
    columns: plots per row.

  Returns:
    An RGB image; a single 'no detections' panel when curves is empty.
  """
  if not curves:
    return _message_panel('no class has both groundtruth and detections')
  rows = math.ceil(len(curves) / columns)
  columns = min(columns, len(curves))
  width, height = _PLOT
  canvas = Image.new('RGB', (columns * width, rows * height), _WHITE)
  draw = ImageDraw.Draw(canvas)
  font = _font()
  for i, ((precision, recall), title) in enumerate(zip(curves, titles)):
    left, top = (i % columns) * width, (i // columns) * height
    x0, y0 = left + _MARGIN, top + height - _MARGIN  # the origin
    x1, y1 = left + width - 10, top + 20  # recall 1, precision 1
    draw.rectangle([x0, y1, x1, y0], outline=_BLACK)
    middle_x, middle_y = (x0 + x1) / 2, (y0 + y1) / 2
    draw.line([middle_x, y0, middle_x, y1], fill=_GREY)
    draw.line([x0, middle_y, x1, middle_y], fill=_GREY)
    for fraction, text in ((0.0, '0'), (0.5, '0.5'), (1.0, '1')):
      draw.text((x0 + fraction * (x1 - x0) - 4, y0 + 3), text, _BLACK, font)
      draw.text((left + 4, y0 - fraction * (y0 - y1) - 5), text, _BLACK,
                font)
    draw.text((x1 - 40, y0 + 15), 'recall', _BLACK, font)
    draw.text((x0 + 4, y1 + 2), 'precision', _BLACK, font)
    draw.text((x0, top + 4), title, _BLACK, font)
    # A step from recall 0 at the first precision, as AP integrates it.
    recall = np.concatenate([[0.0], np.asarray(recall, np.float64)])
    precision = np.concatenate([[precision[0]],
                                np.asarray(precision, np.float64)])
    points = [(x0 + r * (x1 - x0), y0 - p * (y0 - y1))
              for r, p in zip(recall, precision)]
    if len(points) > 1:
      draw.line(points, fill=_CURVE, width=2)
  return canvas


def confusion_matrix(counts, names):
  """The counts as a grid, rows the groundtruth class, columns the detected.

  Args:
    counts: int [K, K].
    names: the K row and column names (the background's included).

  Returns:
    An RGB image; each cell shaded by its share of its row.
  """
  font = _font()
  probe = ImageDraw.Draw(Image.new('RGB', (1, 1)))
  label_width = max(_text_width(probe, name, font) for name in names) + 12
  size = len(names)
  top = label_width + 24
  left = label_width + 24
  canvas = Image.new('RGB', (left + size * _CELL + 8, top + size * _CELL + 8),
                     _WHITE)
  draw = ImageDraw.Draw(canvas)
  draw.text((left, 2), 'detected as', _BLACK, font)
  draw.text((2, top - 14), 'groundtruth', _BLACK, font)
  column_labels = Image.new('RGB', (label_width, size * _CELL), _WHITE)
  column_draw = ImageDraw.Draw(column_labels)
  for j, name in enumerate(names):
    column_draw.text((4, j * _CELL + _CELL // 2 - 5), name, _BLACK, font)
  # Column names read upwards, above their columns.
  canvas.paste(column_labels.rotate(90, expand=True), (left, 18))
  totals = np.maximum(np.asarray(counts).sum(axis=1, keepdims=True), 1)
  shares = np.asarray(counts) / totals
  for i, name in enumerate(names):
    y = top + i * _CELL
    draw.text((4, y + _CELL // 2 - 5), name, _BLACK, font)
    for j in range(size):
      x = left + j * _CELL
      shade = int(255 - 200 * shares[i, j])
      fill = (shade, shade, 255) if i == j else (255, shade, shade)
      draw.rectangle([x, y, x + _CELL - 1, y + _CELL - 1], fill=fill,
                     outline=_GREY)
      text = str(int(counts[i][j]))
      draw.text((x + (_CELL - _text_width(draw, text, font)) // 2,
                 y + _CELL // 2 - 5), text, _BLACK, font)
  return canvas


def table(titles, rows):
  """Text cells in columns, titles first and underlined.

  Args:
    titles: the column titles.
    rows: lists of cell texts, one per column.

  Returns:
    An RGB image.
  """
  font = _font()
  probe = ImageDraw.Draw(Image.new('RGB', (1, 1)))
  widths = [max(_text_width(probe, text, font) for text in column) + 16
            for column in zip(titles, *rows)]
  line = 18
  canvas = Image.new('RGB', (sum(widths) + 8, (len(rows) + 1) * line + 10),
                     _WHITE)
  draw = ImageDraw.Draw(canvas)
  for i, cells in enumerate([titles] + list(rows)):
    left = 4
    for text, width in zip(cells, widths):
      draw.text((left, 4 + i * line), text, _BLACK, font)
      left += width
  draw.line([4, line + 2, sum(widths), line + 2], fill=_GREY)
  return canvas


def fit_tile(image, tile=TILE):
  """A PIL image of `image` scaled so that its longer side is `tile` pixels.

  Args:
    image: uint8 [H, W, 3] array, or a PIL image (returned as it is when it
      already fits).
    tile: the longer side, in pixels.
  """
  picture = image if isinstance(image, Image.Image) else Image.fromarray(
      np.asarray(image))
  if max(picture.size) == tile:
    return picture
  scale = tile / max(picture.size)
  return picture.resize((max(1, round(picture.width * scale)),
                         max(1, round(picture.height * scale))))


def image_grid(images, captions, tile=TILE, columns=GRID_COLUMNS):
  """The images scaled to tiles of `tile` pixels, a caption under each.

  Args:
    images: uint8 [H, W, 3] arrays or PIL images (fit_tile's).
    captions: one line each.
    tile: the longer side of a tile.
    columns: tiles per row.

  Returns:
    An RGB image of grid_size(len(images), tile, columns); a single panel
    saying so when there is no image.
  """
  if not images:
    return _message_panel('no image has a missed or false detection')
  canvas = Image.new('RGB', grid_size(len(images), tile, columns), _WHITE)
  columns = min(columns, len(images))
  draw = ImageDraw.Draw(canvas)
  font = _font()
  for i, (image, caption) in enumerate(zip(images, captions)):
    picture = fit_tile(image, tile)
    left = (i % columns) * tile
    top = (i // columns) * (tile + _CAPTION_HEIGHT)
    canvas.paste(picture, (left + (tile - picture.width) // 2, top))
    draw.text((left + 2, top + tile + 2), caption, _BLACK, font)
  return canvas


def grid_size(count, tile=TILE, columns=GRID_COLUMNS):
  """(width, height) of image_grid's picture of `count` > 0 images."""
  rows = math.ceil(count / columns)
  return min(columns, count) * tile, rows * (tile + _CAPTION_HEIGHT)


def _message_panel(text):
  canvas = Image.new('RGB', (360, 40), _WHITE)
  ImageDraw.Draw(canvas).text((8, 14), text, _BLACK, _font())
  return canvas
