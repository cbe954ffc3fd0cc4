"""Binary instance masks as COCO's 'segm' evaluation sees them.

pycocotools encodes each mask of an image into run lengths (RLE) and then
compares two masks by walking their runs: mask IoU is the intersection's
pixel count over the union's (over the detection's area for a crowd), two
integers divided as doubles. Here each image's masks are read once, in the
rectangles they occupy:

  MaskCrops        one image's masks: each one's rectangle (bit-packed),
                   pixel count, and, on demand, its RLE;
  intersections    pixel counts of (detection, groundtruth) pairs, from
                   the rectangles where the pairs overlap;
  encode_masks     RLEs equal to pycocotools.mask.encode's.

so the evaluation needs no RLE at all, and the numbers stay pycocotools'.
"""
import numpy as np

from od_estimator.metrics import overlaps

# Bits that are set in a byte above 1: any of them makes a mask not 0/1.
_ABOVE_ONE = np.uint64(0xFEFEFEFEFEFEFEFE)


def _crops(masks, name):
  """(extents [N, 4] int64 top, bottom, first, last column, inclusive, -1
  for an empty mask; areas [N] int64 pixel counts; the occupied masks'
  [h, w] crops, in order), checking every value is 0 or 1.

  One pass over all values finds each mask's rows (8 bytes at a time when
  rows allow), then each mask's columns in its rows only, and its area in
  its crop.

  Raises:
    ValueError: for a value other than 0 and 1 (naming `name`).
  """
  masks = overlaps.binary_masks(name, masks, 'COCO mask encoding',
                                check_values=False)
  extents = np.full([len(masks), 4], -1, np.int64)
  areas = np.zeros(len(masks), np.int64)
  if not masks.size:
    return extents, areas, []
  words = masks.shape[2] % 8 == 0 and masks.flags.c_contiguous
  if words:
    values = masks.view(np.uint64)
    rows = np.bitwise_or.reduce(values, axis=2)
    above_one = (rows & _ABOVE_ONE).any()
  else:
    values = masks
    rows = masks.max(axis=2)
    above_one = rows.max() > 1
  if above_one:
    raise overlaps.not_binary(name, masks)
  occupied = rows != 0
  indices = np.flatnonzero(occupied.any(axis=1))
  occupied = occupied[indices]
  tops = np.argmax(occupied, axis=1)
  bottoms = masks.shape[1] - 1 - np.argmax(occupied[:, ::-1], axis=1)
  crops, firsts, lasts, counts = [], [], [], []
  for i, top, bottom in zip(indices.tolist(), tops.tolist(),
                            bottoms.tolist()):
    columns = np.bitwise_or.reduce(values[i, top:bottom + 1], axis=0)
    if words:
      columns = columns.view(np.uint8)
    columns = np.flatnonzero(columns)
    first, last = int(columns[0]), int(columns[-1])
    firsts.append(first)
    lasts.append(last)
    crops.append(masks[i, top:bottom + 1, first:last + 1])
    counts.append(np.count_nonzero(crops[-1]))
  extents[indices] = np.stack([tops, bottoms, firsts, lasts], axis=1)
  areas[indices] = counts
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

  def __init__(self, masks, name='masks'):
    """Reads the masks once. Their crops stay views of `masks` (dense, for
    intersections) until pack().

    Raises:
      ValueError: for a value other than 0 and 1 (naming `name`).
    """
    masks = np.asarray(masks)
    self.shape = tuple(masks.shape[1:3])
    self.extents, self.areas, crops = _crops(masks, name)
    self.crops = crops
    self._packed = None

  def __len__(self):
    return len(self.extents)

  def pack(self):
    """Keeps the crops as bits only (an eighth of their bytes, and no
    reference to the whole masks)."""
    if self._packed is None:
      self._packed = [np.packbits(crop) for crop in self.crops]
      self.crops = None
    return self

  def dense_crops(self):
    """The occupied masks' [h, w] uint8 crops, in order."""
    if self.crops is not None:
      return self.crops
    sizes = (self.extents[:, 1] - self.extents[:, 0] + 1,
             self.extents[:, 3] - self.extents[:, 2] + 1)
    occupied = np.flatnonzero(self.extents[:, 0] >= 0)
    return [np.unpackbits(bits, count=h * w).reshape(h, w)
            for bits, h, w in zip(self._packed, sizes[0][occupied].tolist(),
                                  sizes[1][occupied].tolist())]

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
  d_ext, g_ext = detections.extents[:, None, :], groundtruth.extents[None]
  top = np.maximum(d_ext[..., 0], g_ext[..., 0])
  bottom = np.minimum(d_ext[..., 1], g_ext[..., 1])
  first = np.maximum(d_ext[..., 2], g_ext[..., 2])
  last = np.minimum(d_ext[..., 3], g_ext[..., 3])
  both_occupied = np.minimum(d_ext[..., 0], g_ext[..., 0]) >= 0
  overlapping = same_class & both_occupied & (top <= bottom) & (
      first <= last)
  d_rows, g_rows = np.nonzero(overlapping)
  if not len(d_rows):
    empty = np.zeros(0, np.int64)
    return empty, empty, empty
  d_crops, g_crops = detections.dense_crops(), groundtruth.dense_crops()
  d_index = np.cumsum(detections.extents[:, 0] >= 0) - 1
  g_index = np.cumsum(groundtruth.extents[:, 0] >= 0) - 1
  counts = np.zeros(len(d_rows), np.int64)
  for k, (d, g) in enumerate(zip(d_rows.tolist(), g_rows.tolist())):
    t, b = int(top[d, g]), int(bottom[d, g])
    f, l = int(first[d, g]), int(last[d, g])
    dt, df = detections.extents[d, 0], detections.extents[d, 2]
    gt, gf = groundtruth.extents[g, 0], groundtruth.extents[g, 2]
    counts[k] = np.count_nonzero(
        d_crops[d_index[d]][t - dt:b - dt + 1, f - df:l - df + 1] &
        g_crops[g_index[g]][t - gt:b - gt + 1, f - gf:l - gf + 1])
  shared = counts > 0
  return d_rows[shared], g_rows[shared], counts[shared]
