"""A tiny TF2 SSD and its checkpoints as the original's TF2 trainer writes them.

The model is the original's ssd_mobilenet_v2_320x320 sample config at depth
x0.25, 64x64, 3 classes. Its training checkpoints (ckpt-N) have the keys
and Keras names tests/data/tf2_checkpoint_keys/ records for that config
(tf2_checkpoints.write), the tiny model's shapes and random values.
"""
import os
import re

import numpy as np
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.estimator import moving_averages
from tests import fast_graphs
from tests import tf2_checkpoints
from tests import tiny_ssd
from tests import upstream_folder

CONFIG = 'ssd_mobilenet_v2_320x320_coco17_tpu-8'
NUM_CLASSES = 3
TINY = ('model { ssd { num_classes: %d image_resizer { fixed_shape_resizer { '
        'height: 64 width: 64 } } feature_extractor { depth_multiplier: 0.25 '
        '} } }' % NUM_CLASSES)
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
_DEPTH = re.compile(r'(_\d+x\d+(?:_s2)?)_\d+(_(?:conv|batchnorm)/)')


def write_config(directory, data_dir=None, num_steps=None,
                 use_moving_averages=False, config=CONFIG, tiny=TINY,
                 batch_size=None):
  """Writes the tiny model's pipeline.config into directory; returns its path.

  Args:
    directory: where pipeline.config goes.
    data_dir: when given, shapes TFRecords (tiny_ssd.write_data, 4
      training and 4 eval images) are written there and read by the
      config's inputs.
    num_steps: train_config.num_steps, when given.
    use_moving_averages: eval_config.use_moving_averages.
    config: the original's TF2 sample config the model is made from
      (another family's, e.g. tests/test_faster_rcnn_keras_end_to_end.py).
    tiny: its overrides as pipeline text (TINY: this module's model).
    batch_size: train_config.batch_size, when given (the sample's is 512,
      which a test that trains rarely needs).
  """
  pipeline_config = config_util.read_pipeline_config(
      upstream_folder.config_path(config, tf2=True), tiny)
  if data_dir is not None:
    train, val, label_map = tiny_ssd.write_data(data_dir, num_train=4,
                                                num_val=4)
    for reader, path in ((pipeline_config.train_input_reader, train),
                         (pipeline_config.eval_input_reader[0], val)):
      reader.label_map_path = label_map
      del reader.tf_record_input_reader.input_path[:]
      reader.tf_record_input_reader.input_path.append(path)
    # The sample's placeholder path, which a launch checks.
    if 'PATH_TO_BE_CONFIGURED' in (
        pipeline_config.train_config.fine_tune_checkpoint):
      pipeline_config.train_config.ClearField('fine_tune_checkpoint')
  if num_steps is not None:
    pipeline_config.train_config.num_steps = num_steps
  if batch_size is not None:
    pipeline_config.train_config.batch_size = batch_size
  pipeline_config.eval_config.use_moving_averages = use_moving_averages
  config_util.save_pipeline_config(pipeline_config, str(directory))
  return os.path.join(str(directory), 'pipeline.config')


def _built_model(config_path):
  """The model of config_path, its graph built in the default graph."""
  model_config = config_util.get_configs_from_pipeline_file(config_path)[
      'model']
  model = model_builder.build(model_config, is_training=False)
  model.predict(*model.preprocess(tf.zeros([1, 64, 64, 3])))
  return model


def model_shapes(config_path):
  """{variable name: shape} of the tiny model's graph."""
  with fast_graphs.new_graph():
    _built_model(config_path)
    return {v.op.name: v.shape.as_list()
            for v in tf.compat.v1.global_variables()}


def without_depth(name):
  """A feature map layer's Keras name without its depth, which the depth
  multiplier scales (`..._1x1_256_conv/kernel` -> `..._1x1_conv/kernel`)."""
  return _DEPTH.sub(r'\1\2', name)


def tiny_facts(shapes, facts_name=CONFIG):
  """The original's training checkpoint lines for the tiny model.

  The keys are the original's (of tests/data/tf2_checkpoint_keys/
  <facts_name>.txt); feature map layers take the tiny model's depths in
  their Keras names, variables their shapes, optimizer slots their
  variable's shape; the step and optimizer scalars stay as they are.
  """
  ours = {without_depth(name): name for name in shapes}
  lines = tf2_checkpoints.facts(facts_name)
  by_path = {fact.key[:-len(_VALUE_SUFFIX)]: fact for fact in lines}
  tiny = []
  for fact in lines:
    owner = by_path.get(fact.key.split('/.OPTIMIZER_SLOT/')[0], fact)
    shape = shapes.get(ours.get(without_depth(owner.keras_name)),
                       fact.shape)
    name = ours.get(without_depth(fact.keras_name), fact.keras_name)
    tiny.append(fact._replace(keras_name=name, shape=shape))
  return tiny


def random_value(rng, step=0, chosen=None):
  """value_fn of tf2_checkpoints.write: random weights, `step` as the
  training step (and the optimizer's iterations); chosen(fact), when given
  and not None, instead."""
  def value(fact):
    if chosen is not None and chosen(fact) is not None:
      return chosen(fact)
    if fact.keras_name == 'global_step' or fact.key.endswith(
        '/iter' + _VALUE_SUFFIX):
      return np.full(fact.shape, step)
    if 'moving_variance' in fact.key:
      return 1 + rng.uniform(0, 0.1, fact.shape)
    return rng.normal(0, 0.1, fact.shape)
  return value


def write_training_folder(directory, config_path, steps,
                          facts_name=CONFIG, seed=5, chosen=None,
                          shapes=None):
  """Writes ckpt-1 ... ckpt-<len(steps)> and their `checkpoint` state file.

  As the original's TF2 trainer: checkpoint N is its N-th save, at
  training step steps[N - 1]. Values are random_value's (with `chosen`).
  `shapes`: model_shapes(config_path), when the caller has built the
  model already.

  Returns:
    The last checkpoint's prefix.
  """
  lines = tiny_facts(shapes or model_shapes(config_path), facts_name)
  rng = np.random.RandomState(seed)
  prefixes = [tf2_checkpoints.write(
      os.path.join(str(directory), 'ckpt-%d' % number), lines,
      random_value(rng, step, chosen)) for number, step in enumerate(steps, 1)]
  tf.compat.v1.train.update_checkpoint_state(
      str(directory), prefixes[-1], all_model_checkpoint_paths=prefixes)
  return prefixes[-1]


def resaved_as_tf1(config_path, tf2_prefix, prefix,
                   use_moving_averages=False):
  """Saves the weights of a TF2 checkpoint as our model.ckpt-N at `prefix`.

  With use_moving_averages its averages become the raw weights.
  """
  with fast_graphs.new_graph():
    _built_model(config_path)
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as session:
      moving_averages.restore(session, use_moving_averages, tf2_prefix)
      tf.compat.v1.train.Saver().save(session, prefix)
  return prefix
