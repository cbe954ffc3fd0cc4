r"""Where a training step spends its time, by top-level name scope.

Runs model_fn's train op on one fixed batch (as bench/input_pipeline.py
does) with full tracing for a few steps, and sums the ops' compute times by
the first component of their names (FeatureExtractor, BoxPredictor, Loss,
gradients/FeatureExtractor, ...), or with --by=type|node by kernel type or
node: the profiles behind NOTES.md. With --bfloat16 the session runs the
oneDNN bfloat16 rewrite as model_main --bfloat16 does, and --by=type|node
marks the kernels it ran in bfloat16 and its Casts to and from bfloat16.
bench/orig_step.py --profile does the same for the original's TF2 step.

  .venv/bin/python bench/profile_train_step.py --data_dir=bench/out/data300
"""
import argparse
import collections
import functools
import os
import sys
import tempfile

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

from od_estimator.input_pipeline import inputs
from od_estimator.estimator import cpu_bfloat16
from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder  # pylint: disable=g-import-not-at-top
from od_estimator.config import config_util


def _scope(node_name):
  """'gradients/FeatureExtractor/...' -> 'gradients/FeatureExtractor'.

  Loss is split one level further (target assignment, hard example mining,
  the losses themselves), and so is Faster R-CNN's SecondStageBoxPredictor
  (its box and class layers, and Mask R-CNN's mask head: Conv, Conv_1, ...).
  """
  parts = node_name.split('/')
  depth = 2 if parts[0].startswith('gradients') else 1
  if parts[0].startswith('Loss') or (
      parts[depth - 1].startswith('SecondStageBoxPredictor')):
    depth += 1
  return '/'.join(parts[:depth])


def _bfloat16_names(metadata):
  """Names of the nodes the session ran in bfloat16 (their T), and of the
  Casts to and from it ('name' -> ' bfloat16', ' to bfloat16', ...)."""
  bfloat16 = tf.bfloat16.as_datatype_enum
  marks = {}
  for graph in metadata.partition_graphs:
    for node in graph.node:
      if node.attr['T'].type == bfloat16:
        marks[node.name] = ' bfloat16'
      elif node.op == 'Cast' and node.attr['DstT'].type == bfloat16:
        marks[node.name] = ' to bfloat16'
      elif node.op == 'Cast' and node.attr['SrcT'].type == bfloat16:
        marks[node.name] = ' from bfloat16'
  return marks


def _key(node, by, marks):
  """A traced node's key: its scope (_scope), its kernel's type or the node
  itself (its trace label '[memory] name = Type(inputs)', inputs cut); a
  type or node the session ran in bfloat16 (marks) says so."""
  if by == 'scope':
    return _scope(node.node_name)
  label = node.timeline_label.split('] ', 1)[-1]
  mark = marks.get(node.node_name, '')
  if by == 'node':
    return label[:120] + mark
  return label.split(' = ', 1)[-1].split('(', 1)[0] + mark


def profile(args, directory):
  configs = config_util.get_configs_from_pipeline_file(
      common.ssd_config_path(args, directory))
  model_fn = model_lib.create_model_fn(
      functools.partial(model_builder.build, model_config=configs['model']),
      configs, hparams={'load_pretrained': False})
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        inputs.train_input(configs['train_config'],
                           configs['train_input_config'],
                           configs['model']).take(1).cache().repeat()
    ).get_next()
    spec = model_fn(features, labels, tf.estimator.ModeKeys.TRAIN)
    totals = collections.Counter()
    with tf.compat.v1.Session(config=cpu_bfloat16.session_config()
                              if args.bfloat16 else None) as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      for _ in range(args.warmup):
        sess.run(spec.train_op)
      options = tf.compat.v1.RunOptions(
          trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
          output_partition_graphs=True)
      for _ in range(args.steps):
        metadata = tf.compat.v1.RunMetadata()
        sess.run(spec.train_op, options=options, run_metadata=metadata)
        marks = _bfloat16_names(metadata)
        for device in metadata.step_stats.dev_stats:
          for node in device.node_stats:
            totals[_key(node, args.by, marks)] += (
                node.op_end_rel_micros - node.op_start_rel_micros)
  return totals


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--steps', type=int, default=3)
  parser.add_argument('--top', type=int, default=12)
  parser.add_argument('--by', choices=('scope', 'type', 'node'),
                      default='scope',
                      help='Sum op time by top-level name scope, by the '
                           'kernel\'s op type (after grappler\'s and '
                           'oneDNN\'s rewrites) or by node.')
  common.add_model_args(parser)
  args = parser.parse_args(argv)
  common.quiet()
  with tempfile.TemporaryDirectory() as directory:
    totals = profile(args, directory)
  everything = sum(totals.values())
  print('op time by %s, %s%s depth %g, %dx%d, batch %d (%d traced steps, '
        'summed over threads): %.1f ms a step' % (
            args.by, args.arch, ' bfloat16' if args.bfloat16 else '', args.depth, args.size, args.size, args.batch,
            args.steps, everything / 1000.0 / args.steps))
  for scope, micros in totals.most_common(args.top):
    print('  %-40s %6.1f%%' % (scope, 100.0 * micros / everything))
  return 0


if __name__ == '__main__':
  sys.exit(main())
