"""COCO evaluation of numpy arrays, with pycocotools' numbers.

The evaluators keep each image's groundtruth and detections as columns.
Here pycocotools' COCOeval.evaluate() and accumulate() are redone on whole
arrays: detections grouped by (image, category) and sorted by score, IoUs
as pycocotools computes them (box IoU in float64 with its operations; mask
IoU as the pixels two masks share over their union's, or over a crowd's
detection's, pixel count: the integers its runs give, divided as doubles),
its greedy matching run for every group, IoU threshold and area range at
once, one detection rank at a time, and its precision / recall
accumulation per category with cumulative sums.
The result is an accumulated pycocotools COCOeval (summarize() as usual):
the same numbers, bit for bit, without a dict per detection, the COCO
index or a Python loop per image.

Columns (numpy arrays of one length, in the order the images were added):
  groundtruth: image_id, category_id, bbox [G, 4] COCO x, y, width, height,
    area, iscrowd; for 'segm' also mask_area (pixel counts).
  detections: image_id, category_id, score, area (for 'segm' the mask's
    pixel count); bbox [D, 4] for 'bbox'.
and for 'segm' the mask overlaps: [3, P] int64 detection row, groundtruth
row, shared pixels, of the pairs of one image and class sharing pixels.
"""
import numpy as np


def box_iou(detections, groundtruth, iscrowd):
  """IoU of row pairs: pycocotools' bbIou, element by element.

  Args:
    detections: [N, 4] COCO boxes.
    groundtruth: [N, 4] COCO boxes.
    iscrowd: [N] bool: the union is the detection's area.

  Returns:
    [N] float64, bit for bit what pycocotools.mask.iou gives.
  """
  dx, dy, dw, dh = detections.T
  gx, gy, gw, gh = groundtruth.T
  width = np.minimum(dw + dx, gw + gx) - np.maximum(dx, gx)
  height = np.minimum(dh + dy, gh + gy) - np.maximum(dy, gy)
  intersection = width * height
  detection_area = dw * dh
  union = np.where(iscrowd, detection_area,
                   detection_area + gw * gh - intersection)
  with np.errstate(divide='ignore', invalid='ignore'):
    iou = intersection / union
  return np.where((width > 0) & (height > 0), iou, 0.0)


def _take(columns, order):
  return {name: ([values[i] for i in order.tolist()]
                 if isinstance(values, list) else np.asarray(values)[order])
          for name, values in columns.items()}


def _sorted(columns, image_ids, category_ids, by_score=False):
  """The columns sorted by (image, category) index (then by falling score,
  ties in the order given: COCOeval's mergesort), with 'image',
  'category' (indices), 'rank' in the (image, category) run, and the runs'
  'starts' and 'counts'."""
  image = np.searchsorted(image_ids, np.asarray(columns['image_id']))
  category = np.searchsorted(category_ids,
                             np.asarray(columns['category_id']))
  keys = (category, image)  # lexsort: the last key first.
  if by_score:
    keys = (-np.asarray(columns['score'], np.float64),) + keys
  order = np.lexsort(keys)
  rows = _take(columns, order)
  rows['image'], rows['category'] = image[order], category[order]
  group = rows['image'] * len(category_ids) + rows['category']
  starts = np.flatnonzero(np.diff(group, prepend=-1)) if len(group) else (
      np.zeros(0, np.int64))
  rows['starts'] = starts
  rows['counts'] = np.diff(np.append(starts, len(group)))
  rows['group'] = group[starts]
  rows['rank'] = np.arange(len(group)) - np.repeat(starts, rows['counts'])
  return rows


def _ious(pair_iou, gt_start, gt_count, dt_start, dt_count):
  """Flat IoUs of each (image, category) pair: a [detections, groundtruth]
  block per pair, row-major, one after the other; and the blocks' offsets.
  pair_iou(detection rows, groundtruth rows) gives the IoUs of row pairs.
  """
  sizes = dt_count * gt_count
  offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
  within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], sizes)
  columns = np.repeat(gt_count, sizes)
  dt_rows = np.repeat(dt_start, sizes) + within // columns
  gt_rows = np.repeat(gt_start, sizes) + within % columns
  return pair_iou(dt_rows, gt_rows), offsets


def mask_iou(detections, groundtruth, dt_rows, gt_rows, mask_overlaps):
  """IoU of row pairs: pycocotools' rleIou, element by element.

  Args:
    detections: sorted detection columns with 'row' (the given order) and
      'area' (pixel counts).
    groundtruth: sorted groundtruth columns with 'row', 'mask_area' and
      'iscrowd'.
    dt_rows, gt_rows: [N] the pairs, as sorted rows.
    mask_overlaps: [3, P] detection row, groundtruth row, shared pixels, in
      the given order; pairs not listed share none.

  Returns:
    [N] float64: shared / union (shared / detection area for a crowd), 0
    without shared pixels.
  """
  num_groundtruth = len(groundtruth['iscrowd'])
  known = mask_overlaps[0] * num_groundtruth + mask_overlaps[1]
  order = np.argsort(known)
  known, counts = known[order], mask_overlaps[2][order]
  keys = (detections['row'][dt_rows] * num_groundtruth +
          groundtruth['row'][gt_rows])
  shared = np.zeros(len(keys), np.int64)
  if len(known):
    position = np.minimum(np.searchsorted(known, keys), len(known) - 1)
    listed = known[position] == keys
    shared[listed] = counts[position[listed]]
  detection_area = np.asarray(detections['area'], np.float64)[dt_rows]
  union = np.where(
      groundtruth['iscrowd'][gt_rows].astype(bool), detection_area,
      detection_area + groundtruth['mask_area'][gt_rows] - shared)
  with np.errstate(divide='ignore', invalid='ignore'):
    return np.where(shared > 0, shared / union, 0.0)


def _match(params, pair_iou, groundtruth, detections, gt_ignore):
  """COCOeval.evaluateImg's greedy matching of every (image, category).

  Returns:
    (matched, ignored): [detections, IoU thresholds, area ranges] bool:
    dtMatches != 0 and dtIgnore of each detection.
  """
  num_thresholds, num_areas = len(params.iouThrs), len(params.areaRng)
  shape = (len(detections['rank']), num_thresholds, num_areas)
  matched, matched_ignored = np.zeros(shape, bool), np.zeros(shape, bool)
  both, gt_pair, dt_pair = np.intersect1d(
      groundtruth['group'], detections['group'], assume_unique=True,
      return_indices=True)
  if len(both):
    # Pairs by falling detection count: the pairs with a detection of rank
    # r are the first ones.
    order = np.argsort(-detections['counts'][dt_pair], kind='stable')
    gt_start = groundtruth['starts'][gt_pair][order]
    gt_count = groundtruth['counts'][gt_pair][order]
    dt_start = detections['starts'][dt_pair][order]
    dt_count = detections['counts'][dt_pair][order]
    ious, iou_offsets = _ious(pair_iou, gt_start, gt_count, dt_start,
                              dt_count)
    # One entry per (pair, groundtruth), pair after pair.
    entry_offsets = np.concatenate([[0], np.cumsum(gt_count)])
    entry_pair = np.repeat(np.arange(len(both)), gt_count)
    entry_column = np.arange(entry_offsets[-1]) - entry_offsets[entry_pair]
    entry_row = gt_start[entry_pair] + entry_column
    entry_ignore = gt_ignore[entry_row]  # [entries, areas]
    entry_crowd = groundtruth['iscrowd'][entry_row].astype(bool)
    available = np.ones((len(entry_row), num_thresholds, num_areas), bool)
    thresholds = np.minimum(np.asarray(params.iouThrs), 1 - 1e-10)
    areas = np.arange(num_areas)
    for rank in range(int(dt_count[0])):
      pairs = int(np.count_nonzero(dt_count > rank))
      entries = int(entry_offsets[pairs])
      firsts = entry_offsets[:pairs]
      pair = entry_pair[:entries]
      iou = ious[iou_offsets[pair] + rank * gt_count[pair] +
                 entry_column[:entries]][:, None, None]
      ignore = entry_ignore[:entries][:, None, :]
      candidate = available[:entries] & (iou >= thresholds[None, :, None])
      regular = candidate & ~ignore
      # A regular groundtruth if any can match, else an ignored one; the
      # best IoU, the last of equals (evaluateImg's >= scan).
      candidate = np.where(
          np.logical_or.reduceat(regular, firsts, axis=0)[pair], regular,
          candidate)
      value = np.where(candidate, iou, -1.0)
      best = np.maximum.reduceat(value, firsts, axis=0)
      entry = np.maximum.reduceat(
          np.where(candidate & (value == best[pair]),
                   np.arange(entries)[:, None, None], -1), firsts, axis=0)
      hit = entry >= 0
      entry = np.maximum(entry, 0)
      rows = dt_start[:pairs] + rank
      matched[rows] = hit
      matched_ignored[rows] = hit & entry_ignore[entry, areas]
      taken = hit & ~entry_crowd[entry]
      which, threshold, area = np.nonzero(taken)
      available[entry[which, threshold, area], threshold, area] = False
  outside = _outside(detections['area'], params.areaRng)
  return matched, matched_ignored | (~matched & outside[:, None, :])


def _outside(area, area_ranges):
  """[N, areas] bool: area outside each range (evaluateImg's test)."""
  area = np.asarray(area, np.float64)[:, None]
  ranges = np.asarray(area_ranges, np.float64)
  return (area < ranges[None, :, 0]) | (area > ranges[None, :, 1])


def _accumulate(params, groundtruth, detections, gt_ignore, matched,
                ignored):
  """COCOeval.accumulate()'s precision, recall and scores."""
  num_t, num_r = len(params.iouThrs), len(params.recThrs)
  num_k, num_a, num_m = (len(params.catIds), len(params.areaRng),
                         len(params.maxDets))
  precision = np.full((num_t, num_r, num_k, num_a, num_m), -1.0)
  recall = np.full((num_t, num_k, num_a, num_m), -1.0)
  scores = np.full((num_t, num_r, num_k, num_a, num_m), -1.0)
  valid_gt = np.stack([np.bincount(groundtruth['category'],
                                   weights=~gt_ignore[:, a],
                                   minlength=num_k)
                       for a in range(num_a)], axis=1).astype(np.int64)
  # All detections of a category by falling score; ties by image, then
  # rank (accumulate's mergesort of the per-image lists).
  order = np.lexsort((detections['rank'], detections['image'],
                      -detections['score'], detections['category']))
  category = detections['category'][order]
  bounds = np.searchsorted(category, np.arange(num_k + 1))
  # True and false positives (neither when ignored), in that order, as
  # [areas, IoU thresholds, detections]: runs along the last axis.
  true_positive = np.ascontiguousarray(
      (matched & ~ignored)[order].transpose(2, 1, 0))
  false_positive = np.ascontiguousarray(
      (~matched & ~ignored)[order].transpose(2, 1, 0))
  rank, all_scores = detections['rank'][order], detections['score'][order]
  recall_thresholds = np.asarray(params.recThrs)
  iou_index = np.arange(num_t)[:, None]
  for k in np.flatnonzero(valid_gt.max(axis=1) > 0):
    rows = slice(bounds[k], bounds[k + 1])
    areas = np.flatnonzero(valid_gt[k] > 0)
    reaching = {a: _counts_reaching(recall_thresholds, valid_gt[k, a])
                for a in areas}
    for m, max_detections in enumerate(params.maxDets):
      kept = rank[rows] < max_detections
      count = int(np.count_nonzero(kept))
      if not count:
        recall[:, k, areas, m] = 0
        precision[:, :, k, areas, m] = scores[:, :, k, areas, m] = 0
        continue
      every = count == len(kept)
      score = all_scores[rows] if every else all_scores[rows][kept]
      # Integer counts: their quotients are accumulate's float ones.
      tp = np.cumsum(true_positive[:, :, rows] if every else
                     true_positive[:, :, rows][:, :, kept], axis=2)
      fp = np.cumsum(false_positive[:, :, rows] if every else
                     false_positive[:, :, rows][:, :, kept], axis=2)
      with np.errstate(divide='ignore', invalid='ignore'):
        recall[:, k, areas, m] = (tp[:, :, -1] /
                                  valid_gt[k][:, None]).T[:, areas]
      pr = tp / (fp + tp + np.spacing(1))
      # Each precision the best at its recall or beyond.
      pr = np.maximum.accumulate(pr[:, :, ::-1], axis=2)[:, :, ::-1]
      for a in areas:
        # Where the recall tp / npig first reaches each threshold.
        at = _first_reaching(tp[a], reaching[a])
        inside = at < count
        at = np.minimum(at, count - 1)
        precision[:, :, k, a, m] = np.where(inside, pr[a][iou_index, at], 0)
        scores[:, :, k, a, m] = np.where(inside, score[at], 0)
  return {'params': params, 'counts': [num_t, num_r, num_k, num_a, num_m],
          'precision': precision, 'recall': recall, 'scores': scores}


def _counts_reaching(thresholds, total):
  """Per threshold, the least integer c with c / total >= it (in float64,
  as accumulate's recall tp / npig)."""
  counts = np.ceil(thresholds * total)
  counts = np.where((counts - 1) / total >= thresholds, counts - 1, counts)
  return np.where(counts / total < thresholds, counts + 1, counts)


def _first_reaching(tp, counts):
  """[T, R]: per row of the running counts tp [T, N], the first index
  reaching each of counts [R] (N if none): accumulate's searchsorted of
  the recall, on the integer counts, for every row in one call."""
  rows, num = tp.shape
  offsets = (num + 1) * np.arange(rows)[:, None]
  queries = np.minimum(counts, num + 1)[None, :] + offsets
  return (np.searchsorted((tp + offsets).reshape(-1), queries.reshape(-1),
                          side='left').reshape(queries.shape) -
          num * np.arange(rows)[:, None])


def evaluate(image_ids, category_ids, groundtruth, detections,
             iou_type='bbox', mask_overlaps=None):
  """COCOeval.evaluate() and accumulate() of the columns.

  Args:
    image_ids: the evaluated COCO image ids (ints).
    category_ids: the label map's category ids.
    groundtruth: the groundtruth columns (module docstring).
    detections: the detection columns.
    iou_type: 'bbox' or 'segm'.
    mask_overlaps: for 'segm', the mask overlaps (module docstring).

  Returns:
    A pycocotools COCOeval whose eval holds precision, recall and scores;
    summarize() fills its stats.
  """
  from pycocotools.cocoeval import COCOeval  # pylint: disable=g-import-not-at-top
  coco_eval = COCOeval(iouType=iou_type)
  params = coco_eval.params
  params.imgIds = sorted({int(i) for i in image_ids})
  params.catIds = sorted({int(c) for c in category_ids})
  images, categories = np.array(params.imgIds), np.array(params.catIds)
  groundtruth = _sorted(dict(groundtruth, row=np.arange(
      len(groundtruth['category_id']))), images, categories)
  detections = dict(detections, row=np.arange(len(detections['score'])))
  names = list(detections)
  detections = _sorted(detections, images, categories, by_score=True)
  # Only the first maxDets[-1] of an (image, category) are evaluated.
  within = detections['rank'] < params.maxDets[-1]
  if not within.all():
    detections = _sorted(
        _take({name: detections[name] for name in names},
              np.flatnonzero(within)), images, categories, by_score=True)
  gt_ignore = (groundtruth['iscrowd'].astype(bool)[:, None] |
               _outside(groundtruth['area'], params.areaRng))
  if iou_type == 'bbox':
    def pair_iou(dt_rows, gt_rows):
      return box_iou(detections['bbox'][dt_rows], groundtruth['bbox'][gt_rows],
                     groundtruth['iscrowd'][gt_rows])
  else:
    def pair_iou(dt_rows, gt_rows):
      return mask_iou(detections, groundtruth, dt_rows, gt_rows,
                      mask_overlaps)
  matched, ignored = _match(params, pair_iou, groundtruth, detections,
                            gt_ignore)
  coco_eval._paramsEval = params  # pylint: disable=protected-access
  coco_eval.eval = _accumulate(params, groundtruth, detections, gt_ignore,
                               matched, ignored)
  return coco_eval
