"""Binary instance masks as COCO's 'segm' evaluation sees them.

pycocotools encodes each mask of an image into run lengths (RLE) and then
compares two masks by walking their runs: mask IoU is the intersection's
pixel count over the union's (over the detection's area for a crowd), two
integers divided as doubles. Here each image's masks are read once in full
(their rows, and the 0/1 check) and once more within their rows (their
columns and pixel counts), and kept as the rectangles they occupy:

  MaskCrops        one image's masks: each one's rectangle (bit-packed),
                   pixel count, and, on demand, its RLE;
  intersections    pixel counts of (detection, groundtruth) pairs, from
                   the rectangles where the pairs overlap;
  encode_masks     RLEs equal to pycocotools.mask.encode's.

so the evaluation needs no RLE at all, and the numbers stay pycocotools'.
"""
import numpy as np

from od_estimator.metrics import overlaps

# Rows are read in blocks of this many: one pass over all values with
# numpy's long inner loops finds each mask's occupied blocks, then only the
# first and last occupied block are read row by row.
_BLOCK_ROWS = 8


def _rows(masks, name, nonzero):
  """(the masks, indices [M] of the occupied ones, their top and bottom rows
  [M], inclusive), checking every value is 0 or 1 in the same pass; with
  `nonzero`, masks with values above 1 are returned binarized (> 0)
  instead.

  Raises:
    ValueError: for a value other than 0 and 1 (naming `name`), unless
      `nonzero`.
  """
  count, height, width = masks.shape
  blocks = np.maximum.reduceat(masks.reshape(count, height * width),
                               np.arange(0, height, _BLOCK_ROWS) * width,
                               axis=1)
  if blocks.max() > 1:
    if not nonzero:
      raise overlaps.not_binary(name, masks)
    # The same blocks are occupied; the later reads count pixels.
    masks = (masks > 0).view(np.uint8)
  occupied = blocks != 0
  indices = np.flatnonzero(occupied.any(axis=1))
  occupied = occupied[indices]
  first_block = np.argmax(occupied, axis=1)
  last_block = occupied.shape[1] - 1 - np.argmax(occupied[:, ::-1], axis=1)
  # The rows of each mask's first and last occupied block (a last, partial
  # block repeats the image's last row), and which of them are occupied.
  rows = np.minimum(
      np.stack([first_block, last_block], axis=1)[..., None] * _BLOCK_ROWS +
      np.arange(_BLOCK_ROWS), height - 1)
  occupied = masks[indices[:, None, None], rows].max(axis=3) != 0
  tops = np.where(occupied[:, 0], rows[:, 0], height).min(axis=1)
  bottoms = np.where(occupied[:, 1], rows[:, 1], -1).max(axis=1)
  return masks, indices, tops, bottoms


def _column_counts(masks, indices, tops, bottoms):
  """[M, W] int32: each listed mask's pixel count in each column, summed
  over its rows top..bottom.

  The rows are summed in chunks of up to 255, whose counts fit a byte: 8
  bytes at a time when rows allow (uint64 words, whose bytes then count
  apart); a mask's chunks then add up as int32.
  """
  count, height, width = masks.shape
  rows = masks.reshape(count * height, width)
  if width % 8 == 0 and rows.flags.c_contiguous:
    rows = rows.view(np.uint64)
  pieces = (bottoms - tops + 255) // 255
  first_piece = np.cumsum(pieces) - pieces
  owners = np.repeat(np.arange(len(indices)), pieces)
  starts = (indices * height + tops)[owners] + 255 * (
      np.arange(len(owners)) - first_piece[owners])
  stops = np.minimum(starts + 255, (indices * height + bottoms + 1)[owners])
  sums = np.empty([len(owners), width], np.uint8)
  out_rows = sums.view(rows.dtype)
  for start, stop, out in zip(starts.tolist(), stops.tolist(), out_rows):
    np.add.reduce(rows[start:stop], axis=0, out=out)
  return np.add.reduceat(sums, first_piece, axis=0, dtype=np.int32)


def _crops(masks, name, nonzero=False):
  """(extents [N, 4] int64 top, bottom, first, last column, inclusive, -1
  for an empty mask; areas [N] int64 pixel counts; the occupied masks'
  [h, w] crops, in order), checking every value is 0 or 1 (with
  `nonzero`: masks of any dtype, a value above 0 is the mask).

  All values are read once (_rows); then each mask's rows once more, for
  its columns and area (_column_counts).

  Raises:
    ValueError: for a value other than 0 and 1 (naming `name`), unless
      `nonzero`.
  """
  if nonzero:
    masks = overlaps.nonzero_masks(name, masks, 'COCO mask encoding',
                                   check_values=False)
  else:
    masks = overlaps.binary_masks(name, masks, 'COCO mask encoding',
                                  check_values=False)
  extents = np.full([len(masks), 4], -1, np.int64)
  areas = np.zeros(len(masks), np.int64)
  if not masks.size:
    return extents, areas, []
  masks, indices, tops, bottoms = _rows(masks, name, nonzero)
  counts = _column_counts(masks, indices, tops, bottoms)
  occupied = counts != 0
  firsts = np.argmax(occupied, axis=1)
  lasts = masks.shape[2] - 1 - np.argmax(occupied[:, ::-1], axis=1)
  extents[indices] = np.stack([tops, bottoms, firsts, lasts], axis=1)
  areas[indices] = counts.sum(axis=1)
  crops = [masks[i, top:bottom + 1, first:last + 1]
           for i, top, bottom, first, last in zip(
               indices.tolist(), tops.tolist(), bottoms.tolist(),
               firsts.tolist(), lasts.tolist())]
  return extents, areas, crops


def _column_major_runs(crops, extents, height, width):
  """COCO RLE counts of the occupied masks, given as their [h, w] crops at
  extents [N, 4] (top, bottom, first, last): runs alternate 0s and 1s, 0s
  first, down each column, column after column.

  The crops are read one after the other, transposed into one vector V; a
  run starts where the column-major sequence changes, found on V (inside a
  crop's column) or at the crop columns' ends (from and to the zeros around
  them).
  """
  tops, bottoms, firsts, lasts = extents.T
  heights, widths = bottoms - tops + 1, lasts - firsts + 1
  values = np.concatenate([crop.T.reshape(-1) for crop in crops])
  # One entry per rectangle column: its mask, index, length, start in V and
  # position in its mask's column-major sequence.
  column_mask = np.repeat(np.arange(len(widths)), widths)
  column = np.arange(len(column_mask)) - np.repeat(
      np.cumsum(widths) - widths, widths)
  length = heights[column_mask]
  start = np.cumsum(length) - length
  position = (firsts[column_mask] + column) * height + tops[column_mask]
  # Columns touching end to end (full height): the sequence runs from one
  # column's last value straight into the next one's first.
  adjacent = ((tops == 0) & (bottoms == height - 1))[column_mask]
  # Changes inside a column.
  inner = np.flatnonzero(values[1:] != values[:-1]) + 1
  owner = np.searchsorted(start, inner, side='right') - 1
  inner, owner = inner[inner != start[owner]], owner[inner != start[owner]]
  # A column's first value after a 0 above it (or after the previous
  # column's last value when adjacent), and its last value 1 before a 0.
  before = np.where(adjacent & (column > 0), values[np.maximum(start - 1, 0)],
                    0)
  opens = values[start] != before
  end = start + length - 1
  closes = (values[end] == 1) & ~(adjacent & (column < widths[column_mask] - 1))
  closes &= position + length < height * width
  changes = np.concatenate([position[owner] + inner - start[owner],
                            position[opens], (position + length)[closes]])
  owners = np.concatenate([column_mask[owner], column_mask[opens],
                           column_mask[closes]])
  order = np.lexsort((changes, owners))
  changes, owners = changes[order], owners[order]
  bounds = np.searchsorted(owners, np.arange(len(widths) + 1))
  runs = np.diff(changes, prepend=0)
  runs[bounds[:-1][bounds[:-1] < len(runs)]] = changes[
      bounds[:-1][bounds[:-1] < len(runs)]]
  runs, last = runs.tolist(), changes.tolist()
  return [runs[lo:hi] + [height * width - (last[hi - 1] if hi > lo else 0)]
          for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


def _rles(extents, crops, shape):
  """COCO RLE dicts (text counts) of masks given as _crops returns them."""
  from pycocotools import mask as mask_utils  # pylint: disable=g-import-not-at-top
  height, width = shape
  counts = [[height * width] for _ in range(len(extents))]
  occupied = np.flatnonzero(extents[:, 0] >= 0)
  if len(occupied):
    for i, runs in zip(occupied.tolist(), _column_major_runs(
        crops, extents[occupied], height, width)):
      counts[i] = runs
  rles = mask_utils.frPyObjects(
      [{'counts': c, 'size': [height, width]} for c in counts], height, width)
  for rle in rles:
    rle['counts'] = rle['counts'].decode('ascii')
  return rles


def encode_masks(masks, name='masks'):
  """[N, H, W] 0/1 masks → N COCO RLE dicts {'size', 'counts' (str)}.

  Equal to pycocotools.mask.encode of each mask (what its segm evaluation
  and results files use), computed from the rectangle each mask occupies,
  so the sparse masks of detections need no transposed copy of the whole
  image. Counts are text so the dicts are JSON results as they are.

  Raises:
    ValueError: for a value other than 0 and 1 (naming `name`).
  """
  masks = np.asarray(masks)
  if not len(masks):
    return []
  extents, _, crops = _crops(masks, name)
  return _rles(extents, crops, masks.shape[1:3])


class MaskCrops:
  """One image's [N, H, W] 0/1 masks, kept as their occupied rectangles.

  Attributes:
    shape: (H, W).
    extents: [N, 4] int64 top, bottom, first, last (inclusive), -1 rows for
      empty masks.
    areas: [N] int64 pixel counts (pycocotools.mask.area).
  """

  def __init__(self, masks, name='masks', nonzero=False):
    """Reads the masks once. Their crops stay views of `masks` (dense, for
    intersections) until pack().

    Args:
      masks: [N, H, W] uint8 or bool of 0 and 1; with `nonzero`, of any
        dtype, a value above 0 being the mask (as the original's COCO
        mask evaluator reads them).
      name: the masks' name in errors.
      nonzero: see masks.

    Raises:
      ValueError: for a value other than 0 and 1 (naming `name`), unless
        `nonzero`.
    """
    masks = np.asarray(masks)
    self.shape = tuple(masks.shape[1:3])
    self.extents, self.areas, crops = _crops(masks, name, nonzero)
    self.crops = crops
    self._packed = None

  def __len__(self):
    return len(self.extents)

  def pack(self):
    """Keeps the crops as bits only, one after the other (an eighth of
    their bytes, and no reference to the whole masks)."""
    if self._packed is None:
      self._packed = np.packbits(
          np.concatenate(self.crops, axis=None) if self.crops else
          np.zeros(0, np.uint8))
      self.crops = None
    return self

  def dense_crops(self):
    """The occupied masks' [h, w] uint8 crops, in order."""
    if self.crops is not None:
      return self.crops
    occupied = self.extents[self.extents[:, 0] >= 0]
    heights = occupied[:, 1] - occupied[:, 0] + 1
    widths = occupied[:, 3] - occupied[:, 2] + 1
    sizes = heights * widths
    bits = np.unpackbits(self._packed, count=int(sizes.sum()))
    return [part.reshape(h, w) for part, h, w in zip(
        np.split(bits, np.cumsum(sizes)[:-1]), heights.tolist(),
        widths.tolist())]

  def rles(self, rows=None):
    """COCO RLE dicts of the masks (of `rows`, indices, if given)."""
    rows = np.arange(len(self)) if rows is None else np.asarray(rows)
    occupied = np.cumsum(self.extents[:, 0] >= 0) - 1
    crops = self.dense_crops()
    extents = self.extents[rows]
    return _rles(extents, [crops[occupied[i]] for i in rows.tolist()
                           if self.extents[i, 0] >= 0], self.shape)


def intersections(detections, groundtruth, same_class):
  """Pixel counts shared by detection and groundtruth masks of one image.

  Args:
    detections: MaskCrops of the detections.
    groundtruth: MaskCrops of the groundtruth, the same shape.
    same_class: [D, G] bool: the pairs to count (only masks of one class
      are compared).

  Returns:
    (detection, groundtruth, count): int64 arrays of the pairs that share a
    pixel.
  """
  # Each pair's shared rectangle: its (top, first) and (bottom, last) + 1.
  d_ext, g_ext = detections.extents[:, None], groundtruth.extents[None]
  start = np.maximum(d_ext[..., [0, 2]], g_ext[..., [0, 2]])
  stop = np.minimum(d_ext[..., [1, 3]], g_ext[..., [1, 3]]) + 1
  both_occupied = np.minimum(d_ext[..., 0], g_ext[..., 0]) >= 0
  d_rows, g_rows = np.nonzero(same_class & both_occupied &
                              (start < stop).all(axis=2))
  start, stop = start[d_rows, g_rows], stop[d_rows, g_rows]

  def windows(crops, rows):
    # The shared rectangles, as views of the rows' crops.
    dense = crops.dense_crops()
    index = (np.cumsum(crops.extents[:, 0] >= 0) - 1)[rows]
    corner = crops.extents[rows][:, [0, 2]]
    return [dense[i][top:bottom, first:last]
            for i, (top, first), (bottom, last) in zip(
                index.tolist(), (start - corner).tolist(),
                (stop - corner).tolist())]

  counts = np.array([np.count_nonzero(d & g) for d, g in zip(
      windows(detections, d_rows), windows(groundtruth, g_rows))], np.int64)
  shared = counts > 0
  return d_rows[shared], g_rows[shared], counts[shared]
