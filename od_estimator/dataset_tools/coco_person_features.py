"""tf.Example features of COCO person keypoints and DensePose points.

create_coco_tf_record.create_tf_example takes them, as the original's, as
dicts from annotation id to the keypoint / DensePose annotation of that
object. Every written object gets an entry (zeros when it has none), so the
per-object lists stay aligned with the boxes.
"""
from od_estimator.utils import dataset_util

# The 17 COCO keypoints in the annotations' order.
COCO_KEYPOINT_NAMES = (
    'nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear',
    'left_shoulder', 'right_shoulder', 'left_elbow', 'right_elbow',
    'left_wrist', 'right_wrist', 'left_hip', 'right_hip',
    'left_knee', 'right_knee', 'left_ankle', 'right_ankle')
# What a DensePose annotation must hold to be written.
_DENSEPOSE_KEYS = ('dp_I', 'dp_U', 'dp_V', 'dp_x', 'dp_y', 'bbox')
# DensePose points are on a 256 x 256 grid over the object's box.
_DENSEPOSE_GRID = 256.0


def keypoint_features(annotations, keypoint_annotations_dict, image_width,
                      image_height):
  """Keypoint features of the written annotations.

  Args:
    annotations: the COCO object annotations written, in order.
    keypoint_annotations_dict: {annotation id: {'keypoints': [x, y, v, ...]
      in pixels, 'num_keypoints': int}}.
    image_width: int.
    image_height: int.

  Returns:
    (features, num_skipped): image/object/keypoint/{x, y, num, visibility,
    text} (x, y normalized), and how many entries of the dict belong to no
    written annotation.
  """
  xs, ys, visibilities, names, counts = [], [], [], [], []
  used = 0
  empty = [0] * (3 * len(COCO_KEYPOINT_NAMES))
  for annotation in annotations:
    person = keypoint_annotations_dict.get(annotation['id'])
    used += person is not None
    keypoints = person['keypoints'] if person else empty
    xs.extend(float(x) / image_width for x in keypoints[::3])
    ys.extend(float(y) / image_height for y in keypoints[1::3])
    visibilities.extend(int(v) for v in keypoints[2::3])
    names.extend(COCO_KEYPOINT_NAMES)
    counts.append(int(person['num_keypoints']) if person else 0)
  f = dataset_util
  features = {
      'image/object/keypoint/x': f.float_list_feature(xs),
      'image/object/keypoint/y': f.float_list_feature(ys),
      'image/object/keypoint/num': f.int64_list_feature(counts),
      'image/object/keypoint/visibility': f.int64_list_feature(visibilities),
      'image/object/keypoint/text': f.bytes_list_feature(names),
  }
  return features, len(keypoint_annotations_dict) - used


def _to_unit(value):
  return min(max(value, 0.0), 1.0)


def densepose_features(annotations, densepose_annotations_dict, image_width,
                       image_height):
  """DensePose features of the written annotations.

  Args:
    annotations: the COCO object annotations written, in order (their
      'bbox' [x, y, width, height] places the DensePose grid).
    densepose_annotations_dict: {annotation id: {'dp_I' (1-based part ids),
      'dp_x', 'dp_y' (on the box's 256 grid), 'dp_U', 'dp_V', 'bbox'}}.
    image_width: int.
    image_height: int.

  Returns:
    (features, num_skipped): image/object/densepose/{num, part_index (0-based),
    x, y (normalized to the image), u, v}, and how many entries of the dict
    were not written (no such annotation, or a key missing).
  """
  counts, parts, xs, ys, us, vs = [], [], [], [], [], []
  used = 0
  for annotation in annotations:
    points = densepose_annotations_dict.get(annotation['id'])
    if not points or not all(key in points for key in _DENSEPOSE_KEYS):
      counts.append(0)
      continue
    used += 1
    x, y, width, height = (float(v) for v in annotation['bbox'])
    counts.append(len(points['dp_I']))
    parts.extend(int(part) - 1 for part in points['dp_I'])
    xs.extend((x + _to_unit(v / _DENSEPOSE_GRID) * width) / image_width
              for v in points['dp_x'])
    ys.extend((y + _to_unit(v / _DENSEPOSE_GRID) * height) / image_height
              for v in points['dp_y'])
    us.extend(points['dp_U'])
    vs.extend(points['dp_V'])
  f = dataset_util
  features = {
      'image/object/densepose/num': f.int64_list_feature(counts),
      'image/object/densepose/part_index': f.int64_list_feature(parts),
      'image/object/densepose/x': f.float_list_feature(xs),
      'image/object/densepose/y': f.float_list_feature(ys),
      'image/object/densepose/u': f.float_list_feature(us),
      'image/object/densepose/v': f.float_list_feature(vs),
  }
  return features, len(densepose_annotations_dict) - used
