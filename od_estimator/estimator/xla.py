"""Optional XLA compilation of the Estimator's sessions (model_main --xla).

XLA auto-clustering as TF1 graph mode offers it: the session's
global_jit_level ON_1 groups the graph's compilable ops into clusters that
XLA compiles and fuses. Only the "fusible" ops are clustered (element-wise
maths, reductions, shapes, slices: TF_XLA_FLAGS --tf_xla_ops_to_cluster=
FUSIBLE); convolutions, matrix products and non-max suppression keep
TensorFlow's kernels, because
  - clustering every op fails on SSD's hard example miner (its slice of
    num_hard_examples from fewer anchors is not a compile-time shape), and
  - XLA's CPU convolutions are far slower than TensorFlow's oneDNN ones
    (MobileNet v2 body, training step: 18x slower, bench/NOTES.md).
On CPU, XLA clusters only when TF_XLA_FLAGS holds --tf_xla_cpu_global_jit,
which this module adds. TPUs always compile with XLA: no flag there.

Measured on CPU (bench/xla_step.py, bench/NOTES.md) it does not help: it is
an opt-in for accelerators and for comparing, not a default.
"""
import os

import tensorflow as tf
from tensorflow_estimator.python.estimator import run_config as rc_lib

_XLA_FLAGS = ('--tf_xla_cpu_global_jit', '--tf_xla_ops_to_cluster=FUSIBLE')


def add_xla_flags():
  """Appends the flags to TF_XLA_FLAGS (read when the first session runs)."""
  current = os.environ.get('TF_XLA_FLAGS', '').split()
  os.environ['TF_XLA_FLAGS'] = ' '.join(
      current + [flag for flag in _XLA_FLAGS if flag not in current])


def jit_session_config(session_config=None):
  """A ConfigProto compiling with XLA: a copy of session_config, or of the
  Estimator's default (soft placement, one grappler iteration).

  Must be called before the process's first session is created (XLA reads
  its flags once).
  """
  config = tf.compat.v1.ConfigProto()
  config.CopyFrom(session_config or
                  rc_lib.get_default_session_config())
  config.graph_options.optimizer_options.global_jit_level = (
      tf.compat.v1.OptimizerOptions.ON_1)
  add_xla_flags()
  return config
