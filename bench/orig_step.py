r"""The original's side of item 10: its TF2 trainer's step, timed.

Runs in the original's environment (bench/.orig_venv, or the interpreter
given to bench/peer_original.py), never in ours: builds the original's
detection model from a pipeline config with its own model_builder, reads the
config's training records through its own input pipeline (its
inputs.train_input), and times its model_lib_v2.eager_train_step compiled
with tf.function, as its train_loop runs it on one device (no checkpoints,
no summary writer). Prints one `RESULT {json}` line: images per second and
per CPU second over the timed steps, the last total loss, peak memory.
With --profile=scope|type|node it instead traces the timed steps with
tf.profiler and prints their op time summed by top-level name scope, by
kernel type or by node, as bench/profile_train_step.py does for ours.

  bench/.orig_venv/bin/python bench/orig_step.py \
      --pipeline_config_path=pipeline.config --warmup=2 --steps=10
"""
import argparse
import collections
import glob
import json
import os
import sys
import tempfile

# The original's compiled protos predate protobuf 4: they load only with the
# pure-Python protobuf (used here for config parsing alone).
os.environ.setdefault('PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION', 'python')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from tensorflow.python.ops import cond as tf_cond  # pylint: disable=g-import-not-at-top,wrong-import-position
from tensorflow.python.ops import control_flow_case  # pylint: disable=g-import-not-at-top,wrong-import-position
from tensorflow.python.ops import control_flow_ops  # pylint: disable=g-import-not-at-top,wrong-import-position

# tf_slim 1.1.0's example decoder calls control_flow_ops.case and .cond,
# which TF 2.15 moved to their own modules: point the old names there.
control_flow_ops.case = getattr(control_flow_ops, 'case',
                                control_flow_case.case)
control_flow_ops.cond = getattr(control_flow_ops, 'cond', tf_cond.cond)

from object_detection import inputs  # pylint: disable=g-import-not-at-top,wrong-import-position
from object_detection import model_lib_v2  # pylint: disable=g-import-not-at-top,wrong-import-position
from object_detection.builders import model_builder  # pylint: disable=g-import-not-at-top,wrong-import-position
from object_detection.builders import optimizer_builder  # pylint: disable=g-import-not-at-top,wrong-import-position
from object_detection.utils import config_util  # pylint: disable=g-import-not-at-top,wrong-import-position

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # pylint: disable=g-import-not-at-top,wrong-import-position


def build_step(configs):
  """The original's model, its training data iterator and a compiled step.

  Returns (step, iterator): step(features, labels) runs one eager_train_step
  under tf.function and returns the total loss.
  """
  model_config = configs['model']
  train_config = configs['train_config']
  model = model_builder.build(model_config=model_config, is_training=True)
  dataset = inputs.train_input(
      train_config=train_config,
      train_input_config=configs['train_input_config'],
      model_config=model_config, model=model).repeat()
  unpad = train_config.unpad_groundtruth_tensors
  global_step = tf.Variable(0, trainable=False, dtype=tf.int64,
                            name='global_step')
  optimizer, _ = optimizer_builder.build(train_config.optimizer,
                                         global_step=global_step)
  if train_config.optimizer.use_moving_average:
    # As its train_loop: the variables exist before the shadow copies.
    model_lib_v2._ensure_model_is_built(model, dataset, unpad)  # pylint: disable=protected-access
    optimizer.shadow_copy(model)
  clip = train_config.gradient_clipping_by_norm or None

  @tf.function
  def step(features, labels):
    losses = model_lib_v2.eager_train_step(
        model, features, labels, unpad, optimizer,
        training_step=global_step,
        add_regularization_loss=train_config.add_regularization_loss,
        clip_gradients_value=clip)
    global_step.assign_add(1)
    return losses['Loss/total_loss']
  return step, iter(dataset)


def build_step_from_file(pipeline_config_path):
  """build_step on a pipeline config file: (step, iterator, batch size)."""
  configs = config_util.get_configs_from_pipeline_file(pipeline_config_path)
  # As its train_loop off TPU: use_bfloat16 applies on TPU only.
  configs['train_config'].use_bfloat16 = False
  return build_step(configs) + (configs['train_config'].batch_size,)


# Profiler events that wrap the ops (the function call, the executor).
_WRAPPERS = ('ExecutorState', 'EagerLocalExecute', 'KernelAndDeviceFunc')


def _op_key(event_name, by):
  """'name:Type' -> its key for `by`, or None for events that are no op."""
  name, _, op_type = event_name.rpartition(':')
  op_type = op_type.strip()
  if (not name or name.startswith(_WRAPPERS) or op_type in ('Process', 'Run')
      or op_type.startswith('__inference')):
    return None
  parts = name.split('/')
  scope = '/'.join(parts[:2 if parts[0].startswith('gradient') else 1])
  return {'scope': scope, 'type': op_type, 'node': event_name}[by]


def profile_steps(run_step, steps, by):
  """Op time of `steps` calls of run_step(), summed by `by` over threads."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  totals = collections.Counter()
  with tempfile.TemporaryDirectory() as directory:
    tf.profiler.experimental.start(directory)
    for _ in range(steps):
      run_step()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    for path in glob.glob(os.path.join(directory, '**', '*.xplane.pb'),
                          recursive=True):
      with open(path, 'rb') as f:
        space.ParseFromString(f.read())
  for plane in space.planes:
    for line in plane.lines:
      for event in line.events:
        key = _op_key(plane.event_metadata[event.metadata_id].name, by)
        if key:
          totals[key] += event.duration_ps / 1e6
  return totals


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--pipeline_config_path', required=True)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--steps', type=int, default=10)
  parser.add_argument('--profile', choices=('scope', 'type', 'node'),
                      default=None,
                      help='Trace the timed steps; print op time by this.')
  parser.add_argument('--top', type=int, default=20)
  args = parser.parse_args(argv)
  step, iterator, batch = build_step_from_file(args.pipeline_config_path)
  if args.profile:
    for _ in range(args.warmup):
      step(*next(iterator))
    totals = profile_steps(lambda: step(*next(iterator)), args.steps,
                           args.profile)
    everything = sum(totals.values())
    print('op time by %s (%d traced steps, summed over threads): %.1f ms a '
          'step' % (args.profile, args.steps, everything / 1e3 / args.steps))
    for key, micros in totals.most_common(args.top):
      print('  %-40s %6.1f%%' % (key, 100.0 * micros / everything))
    return 0
  loss, result = peer_env.time_steps(lambda: step(*next(iterator)),
                                     args.warmup, args.steps, batch)
  print('RESULT ' + json.dumps(dict(result, loss=float(loss),
                                    tf_version=tf.__version__)))
  return 0


if __name__ == '__main__':
  sys.exit(main())
