r"""Writes synthetic tf.SequenceExamples for Context R-CNN: shape sequences.

Each sequence stands for one camera trap: `--num_frames` frames of the
coloured-shapes set (create_synthetic_tf_record's images, classes and label
map), in the original's sequence layout (its seq_example_util): context
image/format, image/height, image/width, clip/frames, clip/media_id and
image/context_features with image/context_feature_length; per frame
image/encoded (JPEG), image/source_id, image/timestamp, region/bbox/
{ymin,xmin,ymax,xmax}, region/label/string and region/is_annotated.

The context features are one row per shape in the sequence's frames:
its class one-hot, then its box, then zeros up to
`--context_feature_length` (the rows are truncated when shorter), so a
model can learn from them what the sequence holds. With
`--annotate_every=k` only every k-th frame is annotated; the others have
no regions and region/is_annotated 0. The output is deterministic for a
seed.

  python -m od_estimator.dataset_tools.create_synthetic_sequence_tf_record \
      --output_dir=demo_out/seq --num_train=40 --num_val=10

writes shapes_seq_train.record-0000K-of-0000N, shapes_seq_val.record-...
and shapes_label_map.pbtxt in --output_dir.
"""
import argparse
import os
import sys

import numpy as np
import tensorflow as tf

from od_estimator.dataset_tools import create_synthetic_tf_record as shapes
from od_estimator.dataset_tools import tool_flags
from od_estimator.utils import dataset_util
from od_estimator.utils import file_safety
from od_estimator.utils import flag_checks

_COORDINATES = ('ymin', 'xmin', 'ymax', 'xmax')


def _feature_list(features):
  return tf.train.FeatureList(feature=features)


def make_sequence_example(images, boxes, labels, source_ids, is_annotated,
                          context_features, media_id):
  """Builds a tf.train.SequenceExample in the original's sequence layout.

  Args:
    images: [num_frames] uint8 [height, width, 3] arrays (one size).
    boxes: [num_frames] [num_boxes_i, 4] normalized ymin, xmin, ymax, xmax.
    labels: [num_frames] [num_boxes_i] 1-based class ids.
    source_ids: [num_frames] unique frame ids.
    is_annotated: [num_frames] 0/1.
    context_features: [num_context, length] float32, or None.
    media_id: the sequence's id (clip/media_id).
  """
  f = dataset_util
  height, width = images[0].shape[:2]
  context = {
      'image/format': f.bytes_feature('jpeg'),
      'image/height': f.int64_feature(height),
      'image/width': f.int64_feature(width),
      'image/channels': f.int64_feature(3),
      'clip/frames': f.int64_feature(len(images)),
      'clip/media_id': f.bytes_feature(media_id),
  }
  if context_features is not None:
    context['image/context_features'] = f.float_list_feature(
        np.ravel(context_features))
    context['image/context_feature_length'] = f.int64_feature(
        context_features.shape[1])
  frames = {
      'image/encoded': [f.bytes_feature(shapes.encode_jpeg(image))
                        for image in images],
      'image/source_id': [f.bytes_feature(str(i)) for i in source_ids],
      'image/timestamp': [f.int64_feature(t) for t in range(len(images))],
      'region/is_annotated': [f.int64_feature(int(a)) for a in is_annotated],
      'region/label/string': [
          f.bytes_list_feature([shapes.CLASSES[l - 1] for l in frame])
          for frame in labels],
  }
  for axis, name in enumerate(_COORDINATES):
    frames['region/bbox/' + name] = [
        f.float_list_feature(np.reshape(frame, [-1, 4])[:, axis])
        for frame in boxes]
  return tf.train.SequenceExample(
      context=tf.train.Features(feature=context),
      feature_lists=tf.train.FeatureLists(feature_list={
          key: _feature_list(value) for key, value in frames.items()}))


def context_rows(boxes, labels, length):
  """[num boxes, length] float32: per box its class one-hot, then its box."""
  rows = [np.concatenate([np.eye(len(shapes.CLASSES))[label - 1], box])
          for frame_boxes, frame_labels in zip(boxes, labels)
          for box, label in zip(frame_boxes, frame_labels)]
  table = np.zeros([len(rows), length], np.float32)
  for index, row in enumerate(rows):
    table[index, :min(length, len(row))] = row[:length]
  return table


def make_sequence(rng, num_frames, image_size, max_shapes, annotate_every,
                  context_feature_length, first_id, media_id):
  """One synthetic sequence; context features when the length is > 0."""
  images, boxes, labels, annotated = [], [], [], []
  for index in range(num_frames):
    image, frame_boxes, frame_labels, _ = shapes.make_image(
        rng, image_size, image_size, max_shapes)
    is_annotated = index % annotate_every == 0
    images.append(image)
    boxes.append(frame_boxes if is_annotated else np.zeros([0, 4]))
    labels.append(frame_labels if is_annotated else np.zeros([0], int))
    annotated.append(is_annotated)
  context = None
  if context_feature_length:
    context = context_rows(boxes, labels, context_feature_length)
  return make_sequence_example(
      images, boxes, labels, range(first_id, first_id + num_frames),
      annotated, context, media_id)


def write_split(output_prefix, num_sequences, num_shards, seed, first_id=0,
                **sequence_args):
  """Writes one split of sequences; returns the shard file names."""
  rng = np.random.default_rng(seed)
  num_frames = sequence_args['num_frames']
  with dataset_util.open_sharded_output_tfrecords(
      output_prefix, num_shards) as writers:
    for index in range(num_sequences):
      example = make_sequence(
          rng, first_id=first_id + index * num_frames,
          media_id='sequence_%d' % (first_id // num_frames + index),
          **sequence_args)
      writers[index % num_shards].write(example.SerializeToString())
  return dataset_util.sharded_filenames(output_prefix, num_shards)


def create_dataset(output_dir, num_train=40, num_val=10, num_frames=3,
                   image_size=64, max_shapes=2, annotate_every=1,
                   context_feature_length=16, num_train_shards=1,
                   num_val_shards=1, seed=0):
  """Writes both splits and the label map into output_dir.

  Returns:
    {'train': [files], 'val': [files], 'label_map': path}.
  """
  tf.io.gfile.makedirs(output_dir)
  label_map_path = os.path.join(output_dir, shapes.LABEL_MAP_NAME)
  file_safety.write_file(label_map_path, shapes.label_map_text())
  sequence_args = dict(num_frames=num_frames, image_size=image_size,
                       max_shapes=max_shapes, annotate_every=annotate_every,
                       context_feature_length=context_feature_length)
  # Different seeds per split keep train and val frames distinct.
  train = write_split(os.path.join(output_dir, 'shapes_seq_train.record'),
                      num_train, num_train_shards, seed, **sequence_args)
  val = write_split(os.path.join(output_dir, 'shapes_seq_val.record'),
                    num_val, num_val_shards, seed + 1,
                    first_id=num_train * num_frames, **sequence_args)
  return {'train': train, 'val': val, 'label_map': label_map_path}


def _parser():
  parser = argparse.ArgumentParser(
      description='Write synthetic coloured-shapes tf.SequenceExamples with '
      'context features (Context R-CNN).')
  parser.add_argument('--output_dir', required=True)
  at_least = flag_checks.at_least
  parser.add_argument('--num_train', type=at_least(0), default=40,
                      help='Training sequences.')
  parser.add_argument('--num_val', type=at_least(0), default=10,
                      help='Evaluation sequences.')
  parser.add_argument('--num_frames', type=at_least(1), default=3)
  parser.add_argument('--image_size', type=at_least(1), default=64,
                      help='Frames are square, this many pixels a side.')
  parser.add_argument('--max_shapes', type=at_least(1), default=2,
                      help='Each frame holds 1..max_shapes shapes.')
  parser.add_argument('--annotate_every', type=at_least(1), default=1,
                      help='Annotate frames 0, k, 2k, ... of each sequence.')
  parser.add_argument('--context_feature_length', type=at_least(0),
                      default=16, help='0 writes no context features.')
  parser.add_argument('--num_train_shards', type=at_least(1), default=1)
  parser.add_argument('--num_val_shards', type=at_least(1), default=1)
  parser.add_argument('--seed', type=int, default=0)
  return tool_flags.add_logging_flags(parser)


@tool_flags.reporting_input_errors
def main(argv=None):
  written = create_dataset(**tool_flags.tool_arguments(_parser(), argv))
  print('wrote %d train shard(s), %d val shard(s) and %s' % (
      len(written['train']), len(written['val']), written['label_map']))
  return 0


if __name__ == '__main__':
  sys.exit(main())
