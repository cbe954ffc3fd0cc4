"""A tiny real Context R-CNN pipeline config for tests.

tests/tiny_faster_rcnn.py's config (64x64, 8 proposals) with a
context_config of MAX_CONTEXT rows of LENGTH values and a bottleneck of
BOTTLENECK, reading tf.SequenceExamples with context features
(create_synthetic_sequence_tf_record's sequences): each training example
is one frame of a sequence, evaluation reads every frame.
"""
import os

import numpy as np
import tensorflow as tf

from od_estimator.dataset_tools import create_synthetic_sequence_tf_record
from od_estimator.dataset_tools import create_synthetic_tf_record
from tests import tiny_faster_rcnn

# The generator's context rows: a class one-hot, then the box.
LENGTH = len(create_synthetic_tf_record.CLASSES) + 4
MAX_CONTEXT = 8
BOTTLENECK = 8
CONTEXT_CONFIG = """context_config {
      max_num_context_features: %d
      context_feature_length: %d
      attention_bottleneck_dimension: %d
      attention_temperature: 0.2
    }""" % (MAX_CONTEXT, LENGTH, BOTTLENECK)
_SEQUENCE_READER = 'input_type: TF_SEQUENCE_EXAMPLE load_context_features: true'
# Both input readers read sequences with their context features.
READER_EDITS = (
    ('max_number_of_boxes: 8', 'max_number_of_boxes: 8 ' + _SEQUENCE_READER),
    ('num_readers: 1', 'num_readers: 1 ' + _SEQUENCE_READER),
)


def write_config(directory, data_dir, num_train=2, num_val=2, num_frames=2):
  """Writes the Context R-CNN config on generated sequences; its path.

  Args:
    directory: where pipeline.config goes.
    data_dir: where the sequence TFRecords and the label map go.
    num_train, num_val: sequences per split.
    num_frames: frames per sequence.
  """
  written = create_synthetic_sequence_tf_record.create_dataset(
      str(data_dir), num_train=num_train, num_val=num_val,
      num_frames=num_frames, context_feature_length=LENGTH)
  path = os.path.join(str(directory), 'pipeline.config')
  with open(path, 'w') as f:
    f.write(tiny_faster_rcnn.apply_edits(
        tiny_faster_rcnn.CONFIG % {
            'train': written['train'][0], 'val': written['val'][0],
            'label_map': written['label_map'],
            'extractor': 'faster_rcnn_resnet50',
            'model_fields': CONTEXT_CONFIG, 'batch_size': 1,
            'train_fields': ''}, READER_EDITS))
  return path


def write_overfit_sequences(data_dir, frames):
  """Writes each frame as a one-frame sequence of one camera into
  data_dir/shapes_seq.record; returns the record's path.

  The context features of each are the generator's rows of the camera's
  shapes (every frame's), so the attention chooses among them.

  Args:
    data_dir: an existing folder.
    frames: (image, box, label, mask) per frame.
  """
  _, boxes, labels, _ = zip(*frames)
  labels = [np.array([label]) for label in labels]
  context = create_synthetic_sequence_tf_record.context_rows(
      boxes, labels, LENGTH)
  record = os.path.join(str(data_dir), 'shapes_seq.record')
  with tf.io.TFRecordWriter(record) as writer:
    for index, (image, box, label, _) in enumerate(frames):
      writer.write(create_synthetic_sequence_tf_record.make_sequence_example(
          [image], [box], [[label]], [index], [1], context,
          'camera_0_%d' % index).SerializeToString())
  return record


# The overfitting recipe trains the attention block too: its query, key and
# value projections and its output projection (fully_connected, top level).
_TRAIN_ATTENTION = (
    ('update_trainable_variables: "^Conv/"',
     'update_trainable_variables: "^Conv/" update_trainable_variables: '
     '"^AttentionBlock/" update_trainable_variables: "^fully_connected/"'),)


def write_overfit_config(directory, data_dir, **kwargs):
  """tiny_faster_rcnn.write_overfit_config's images and recipe as one
  sequence with context, the attention trained with the heads."""
  return tiny_faster_rcnn.write_overfit_config(
      directory, data_dir, model_fields=CONTEXT_CONFIG,
      edits=READER_EDITS + _TRAIN_ATTENTION,
      write_records=write_overfit_sequences, **kwargs)
