"""One training step on one device and under MirroredStrategy, compared.

Two CPU session devices stand in for two GPUs. Training batches are the
same two images twice (use_repeated_pair), so each replica's half-batch
has the whole batch's content: one step from the same checkpoint must then
give the same losses and updated variables with 2 replicas as with 1 device.
"""
import os
import re
import shutil

import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from od_estimator.config import config_util
from od_estimator.estimator import model_lib

NUM_REPLICAS = 2


def use_repeated_pair(configs, train_glob, root):
  """Points the train reader at records [a, b, a, b, ...], in order.

  Args:
    configs: configs dict (config_util), edited in place.
    train_glob: the generated training shards; a and b are the first
      shard's first two records.
    root: where pairs.record goes.
  """
  first_shard = sorted(tf.io.gfile.glob(train_glob))[0]
  pair = list(tf.compat.v1.io.tf_record_iterator(first_shard))[:2]
  pairs = os.path.join(str(root), 'pairs.record')
  with tf.io.TFRecordWriter(pairs) as writer:
    for record in pair * 8:
      writer.write(record)
  reader = configs['train_input_config']
  reader.tf_record_input_reader.ClearField('input_path')
  reader.tf_record_input_reader.input_path.append(pairs)
  reader.shuffle = False
  reader.num_readers = 1
  configs['train_config'].ClearField('data_augmentation_options')


def _train_one_step(config, model_dir, hparams_overrides,
                    **run_config_kwargs):
  """One training step as model_main builds it; summaries every step.

  No graph.pbtxt or meta graph: the checkpoints and summaries are all the
  tests read.
  """
  run_config = tf.estimator.RunConfig(
      model_dir=model_dir, checkpoint_save_graph_def=False,
      save_summary_steps=1, log_step_count_steps=None, **run_config_kwargs)
  parts = model_lib.create_estimator_and_inputs(
      run_config=run_config,
      hparams=config_util.parse_hparams_overrides(hparams_overrides),
      pipeline_config_path=config, train_steps=1)
  parts['estimator'].train(parts['train_input_fn'], max_steps=1)


def _copy_initial_checkpoint(source_dir, target_dir):
  """Makes target_dir resume from source_dir's step-0 checkpoint."""
  os.makedirs(target_dir)
  for path in os.listdir(source_dir):
    if path.startswith('model.ckpt-0.'):
      shutil.copy(os.path.join(source_dir, path), target_dir)
  with open(os.path.join(target_dir, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-0"\n')


def train_single_then_mirrored(tmp_path_factory, write_config,
                               hparams_overrides=''):
  """Trains one step on one device, then from there with 2 replicas.

  Args:
    tmp_path_factory: pytest's.
    write_config: root directory -> path of the pipeline config to train.
    hparams_overrides: as model_main's --hparams_overrides.

  Returns:
    (single-device model dir, mirrored model dir).
  """
  root = tmp_path_factory.mktemp('mirrored')
  config = write_config(root)
  single_dir = os.path.join(str(root), 'single')
  mirrored_dir = os.path.join(str(root), 'mirrored')
  _train_one_step(config, single_dir, hparams_overrides)
  _copy_initial_checkpoint(single_dir, mirrored_dir)
  _train_one_step(config, mirrored_dir, hparams_overrides,
                  **model_lib.mirrored_run_config_kwargs(NUM_REPLICAS, 'CPU'))
  return single_dir, mirrored_dir


def first_losses(model_dir, tags=('Loss/total_loss',)):
  """(Estimator's loss, *tags) summaries of the first step.

  Under MirroredStrategy the first is the mean over replicas, the others
  the first replica's. The Estimator's summary is tagged `loss`, or
  `loss_1` when the graph has an op named `loss` already.
  """
  accumulator = event_accumulator.EventAccumulator(model_dir)
  accumulator.Reload()
  found = accumulator.Tags()['scalars']
  estimator_tag = [tag for tag in found if re.fullmatch(r'loss(_\d+)?', tag)]
  assert len(estimator_tag) == 1, found
  return tuple(accumulator.Scalars(tag)[0].value
               for tag in estimator_tag + list(tags))


def assert_losses_match(single, mirrored, summed_terms):
  """The first step's losses (first_losses) of both runs agree.

  Each loss is a sum of non-negative per-anchor, per-proposal or per-image
  terms, which the runs group differently: as in update_tolerances, two
  float32 orders of n terms differ by up to n eps of their sum, doubled
  for the rounding the terms carry from the forward pass.

  Args:
    single, mirrored: first_losses of the two runs.
    summed_terms: the longest sum behind any value of the model.
  """
  assert min(single) > 0
  np.testing.assert_allclose(
      mirrored, single, atol=0,
      rtol=2 * summed_terms * np.finfo(np.float32).eps)


def variables(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def trained_variables(single_dir, mirrored_dir):
  """(before, single, mirrored) {name: value} without global_step."""
  before = variables(os.path.join(single_dir, 'model.ckpt-0'))
  single = variables(os.path.join(single_dir, 'model.ckpt-1'))
  mirrored = variables(os.path.join(mirrored_dir, 'model.ckpt-1'))
  assert sorted(mirrored) == sorted(single)
  assert mirrored.pop('global_step') == single.pop('global_step') == 1
  del before['global_step']
  return before, single, mirrored


def kind(name):
  """What a variable's one-step update is, for its tolerance."""
  if name.endswith('/Momentum'):
    return 'gradient'  # Momentum's slot after step 1 is the gradient.
  if name.endswith('moving_mean'):
    return 'batch mean'  # (1 - decay) times the batch mean.
  return 'variable'  # -learning_rate times its gradient.


def update_tolerances(before, after, summed_terms):
  """Noise floor of one-step updates, per kind, from float32 rounding.

  Both runs add the same per-image and per-position terms, grouped
  differently (2-image replica sums then an all-reduce, vs 4-image sums,
  and other kernel blocking in every reduction). A float32 sum of n terms
  is within (n - 1) eps / 2 sum(|terms|) of the exact one, so two orders
  differ by up to n eps sum(|terms|), relative to the terms, not to the
  result: a gradient that cancels to ~0 (a batch norm's beta that another
  batch norm follows) is all noise. The terms are errors backpropagated
  from the heads, or activations, no larger than the model's whole update
  of that kind; a factor 2 covers the rounding they carry from the earlier
  layers (and the variable's own, eps |value|, is far below). Updates
  under this floor are checked only to it.

  Args:
    before: {name: value} before the step.
    after: {name: value} after it.
    summed_terms: the longest sum behind any gradient or batch mean of
      the model.

  Returns:
    {kind: tolerance of the norm of the difference of two updates}.
  """
  norms = {}
  for name, value in after.items():
    norms[kind(name)] = norms.get(kind(name), 0.) + float(
        np.sum(np.square(value - before[name], dtype=np.float64)))
  eps = np.finfo(np.float32).eps
  return {key: 2 * summed_terms * eps * np.sqrt(norm)
          for key, norm in norms.items()}


def assert_updates_match(before, single, mirrored, summed_terms,
                         comparable=lambda name: Ellipsis):
  """Each variable's two updates agree to update_tolerances.

  Args:
    before, single, mirrored: {name: value} (trained_variables).
    summed_terms: as update_tolerances takes it.
    comparable: name -> index of the elements the runs must share.
  """
  tolerances = update_tolerances(before, single, summed_terms)
  moved = 0
  for name, value in single.items():
    step = value - before[name]
    moved += bool(np.any(step))
    error = np.linalg.norm(
        (mirrored[name] - before[name] - step)[comparable(name)])
    assert error <= tolerances[kind(name)], (name, error, tolerances)
  assert moved > len(single) // 2  # the step really trained the model
