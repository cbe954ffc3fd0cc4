"""A tiny Faster R-CNN exported for tf.Examples, and camera-trap records.

The model is the builder tests' two-stage config on the fake extractor
(32x32 inputs, 5 detections, second-stage features of 2x2x6) with
output_final_box_features, from its initialization, exported with
`--input_type tf_example`: it serves detection_features.
"""
import glob
import io
import os

import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.export import exporter
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.utils import dataset_util
from tests import fakes
from tests import saved_models
from tests.builders import test_faster_rcnn_model_builder as builder_tests

FEATURE_DEPTH = 6  # FakeFasterRCNNFeatureExtractor's second stage.
_SIZE = 32


def _pipeline():
  config = config_util.parse_pipeline_text('eval_config {}')
  config.model.CopyFrom(builder_tests._config(
      extra='output_final_box_features: true'))
  # Anchors of 8 and 16 pixels, inside the 32x32 inputs.
  anchors = config.model.faster_rcnn.first_stage_anchor_generator
  anchors.grid_anchor_generator.height = 16
  anchors.grid_anchor_generator.width = 16
  return config


def _initial_checkpoint(config, directory):
  """Saves the model's initial weights; returns the checkpoint prefix."""
  os.makedirs(str(directory), exist_ok=True)
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(3)
    model = model_builder.build(config.model, is_training=False)
    images, shapes = model.preprocess(tf.zeros([1, _SIZE, _SIZE, 3]))
    model.postprocess(model.predict(images, shapes), shapes)
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return tf.compat.v1.train.Saver().save(
          session, os.path.join(str(directory), 'model.ckpt'))


def export(directory):
  """Exports the tiny model for tf.Examples; returns its saved_model/."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
        'fake', fakes.FakeFasterRCNNFeatureExtractor)
    config = _pipeline()
    checkpoint = _initial_checkpoint(config, directory / 'train')
    exporter.export_inference_graph('tf_example', config, checkpoint,
                                    str(directory / 'export'))
  return str(directory / 'export' / 'saved_model')


# export_once's export in this process, by base temp folder.
_EXPORTS = {}


def export_once(tmp_path_factory):
  """The export with detection_features, made once per test process (the
  detection and embedding tests share it); its saved_model/ path."""
  key = str(tmp_path_factory.getbasetemp())
  if key not in _EXPORTS:
    _EXPORTS[key] = export(tmp_path_factory.mktemp('tiny_export'))
  return _EXPORTS[key]


def signature_only_model(directory, outputs):
  """A SavedModel fed serialized tf.Examples serving zeros as `outputs`:
  for the tools' checks of a model's signature; its path."""
  with tf.Graph().as_default() as graph:
    inputs = tf.compat.v1.placeholder(tf.string, [None], name='tf_example')
    served = {name: tf.identity(tf.zeros_like(inputs, tf.float32), name=name)
              for name in outputs}
  path = os.path.join(str(directory), 'saved_model')
  exporter.write_saved_model(path, graph.as_graph_def(), inputs, served)
  return path


def serve(saved_model, examples):
  """The SavedModel's outputs on a batch of tf.Examples, run directly."""
  return saved_models.serve(saved_model, np.array(
      [value.SerializeToString() for value in examples], object))


def example(source_id, labels=(), boxes=None, date=None, seed=0, size=64):
  """A camera-trap tf.Example of a random JPEG image.

  Args:
    source_id: image/source_id (and image/filename).
    labels: image/object/class/label values (text 'class_<label>').
    boxes: optional [N, 4] ymin, xmin, ymax, xmax boxes.
    date: optional image/date_captured text.
    seed: the image's random seed.
    size: image height and width.
  """
  pixels = np.random.RandomState(seed).randint(0, 256, [size, size, 3])
  encoded = io.BytesIO()
  Image.fromarray(pixels.astype(np.uint8)).save(encoded, format='JPEG')
  f = dataset_util
  feature = {
      'image/encoded': f.bytes_feature(encoded.getvalue()),
      'image/format': f.bytes_feature(b'jpeg'),
      'image/height': f.int64_feature(size),
      'image/width': f.int64_feature(size),
      'image/source_id': f.bytes_feature(source_id.encode()),
      'image/filename': f.bytes_feature(source_id.encode() + b'.jpg'),
      'image/location': f.bytes_feature(b'camera_1'),
      'image/seq_id': f.bytes_feature(b'sequence_1'),
  }
  if labels:
    feature['image/object/class/label'] = f.int64_list_feature(list(labels))
    feature['image/object/class/text'] = f.bytes_list_feature(
        [b'class_%d' % label for label in labels])
  if boxes is not None:
    boxes = np.asarray(boxes, np.float32)
    for index, name in enumerate(('ymin', 'xmin', 'ymax', 'xmax')):
      feature['image/object/bbox/' + name] = f.float_list_feature(
          boxes[:, index].tolist())
  if date:
    feature['image/date_captured'] = f.bytes_feature(date.encode())
  return tf.train.Example(features=tf.train.Features(feature=feature))


def write_records(path, examples):
  """Writes the examples into a TFRecord; returns its path."""
  with tf.io.TFRecordWriter(str(path)) as writer:
    for value in examples:
      writer.write(value.SerializeToString())
  return str(path)


def read_outputs(prefix):
  """(sorted output file names, {source_id: tf.Example}) of a run."""
  files = sorted(glob.glob(prefix + '-*-of-*'))
  examples = {}
  for path in files:
    for record in tf.compat.v1.io.tf_record_iterator(path):
      parsed = tf.train.Example.FromString(record)
      source_id = parsed.features.feature['image/source_id'].bytes_list.value
      examples[source_id[0].decode()] = parsed
  return files, examples
