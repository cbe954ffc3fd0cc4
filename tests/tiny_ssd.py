"""A tiny real SSD (MobileNet v2 x0.25, 64x64) and synthetic data for tests."""
import os

import tensorflow as tf

from od_estimator.dataset_tools import create_synthetic_tf_record
from od_estimator.config import config_util

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_CONFIG = os.path.join(REPO, 'samples', 'configs',
                           'ssd_mobilenet_v2_shapes.config')

# Generic overrides shrinking the demo config to test size.
TINY_OVERRIDES = ','.join([
    'batch_size=4',
    'model.ssd.feature_extractor.depth_multiplier=0.25',
    'model.ssd.image_resizer.fixed_shape_resizer.height=64',
    'model.ssd.image_resizer.fixed_shape_resizer.width=64',
])

# For tests of what runs around the model (clusters, signals, devices, bad
# data, relaunches, exports): MobileNet v1, and in LIGHT_OVERRIDES without
# moving averages. Its training graph has ~12.5k ops against the demo
# model's ~21.6k and builds in about half the time, which is most of these
# tests' time. The demo's own model (MobileNet v2, moving averages) stays
# end to end in test_model_main.
V1_OVERRIDES = (TINY_OVERRIDES +
                ',model.ssd.feature_extractor.type=ssd_mobilenet_v1')
LIGHT_OVERRIDES = (V1_OVERRIDES +
                   ',train_config.optimizer.use_moving_average=false')


def run_config(model_dir):
  """RunConfig of in-process test training: checkpoints without the graph.

  No graph.pbtxt or meta graph, summaries or step-rate logs: about a
  fifth of a short run. model_main's own runs keep them. (Its sessions run
  without grappler, as every session of the tests: tests/plain_session.py.)
  """
  return tf.estimator.RunConfig(
      model_dir=str(model_dir), checkpoint_save_graph_def=False,
      save_summary_steps=None, log_step_count_steps=None)


def model_config(size=64):
  """The demo config's model at test size (depth x0.25, size x size)."""
  model = config_util.get_configs_from_pipeline_file(DEMO_CONFIG)['model']
  model.ssd.feature_extractor.depth_multiplier = 0.25
  model.ssd.image_resizer.fixed_shape_resizer.height = size
  model.ssd.image_resizer.fixed_shape_resizer.width = size
  return model


def write_data(directory, num_train=16, num_val=8):
  """Writes shapes TFRecords; returns (train glob, val glob, label map)."""
  written = create_synthetic_tf_record.create_dataset(
      str(directory), num_train=num_train, num_val=num_val, image_size=64,
      num_train_shards=2, num_val_shards=1, max_shapes=2, seed=3)
  return (os.path.join(str(directory), 'shapes_train.record-*'),
          os.path.join(str(directory), 'shapes_val.record-*'),
          written['label_map'])


def write_config(directory, data_dir, extra=''):
  """Writes the demo config pointed at test data; returns its path."""
  train, val, label_map = write_data(data_dir)
  with open(DEMO_CONFIG) as f:
    text = f.read()
  text = text.replace(
      'demo_out/data/shapes_train.record-?????-of-00002', train).replace(
          'demo_out/data/shapes_val.record-?????-of-00001', val).replace(
              'demo_out/data/shapes_label_map.pbtxt', label_map)
  path = os.path.join(str(directory), 'pipeline.config')
  with open(path, 'w') as f:
    f.write(text + extra)
  return path


def written_config(root):
  """write_config into root/data; returns (path, its text, the train glob)."""
  path = write_config(root, os.path.join(str(root), 'data'))
  with open(path) as f:
    text = f.read()
  train_glob = os.path.join(str(root), 'data', 'shapes_train.record-*')
  assert train_glob in text
  return path, text, train_glob
