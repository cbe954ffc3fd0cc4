"""bfloat16 off TPU: train_config.use_bfloat16, or --bfloat16 for any config.

On a CPU with bfloat16 instructions (AVX-512 BF16, AMX), TensorFlow's
oneDNN kernels run convolutions and matrix products faster in bfloat16.
There the Estimator's sessions (training and evaluation) get grappler's
oneDNN mixed-precision rewrite (`auto_mixed_precision_onednn_bfloat16`),
its lists cut (_FLOAT32_OPS) so that only the dense convolutions and
matrix products (forward and gradients) and the data moves between them
(pads, max pools, concatenations, reshapes) run in bfloat16, with casts
inserted around them; batch norms, activations, element-wise arithmetic
and depthwise convolutions stay float32. The graph as built is unchanged,
so variables, checkpoints, optimizer updates, summaries, losses and
exports stay float32. On TPU, model_fn keeps the TPU's bfloat16 scope
instead. The exporters' --bfloat16 bakes the same rewrite into an exported
graph (export/bfloat16_graph.py).

The rewrite was chosen over the TPU path's bfloat16 scope (bench/NOTES.md,
"bfloat16"): the scope runs the whole prediction in bfloat16, gave a
non-finite loss on the tiny SSD by its third step, fails on ops without
bfloat16 CPU kernels (crop_and_resize in Faster R-CNN), and was no faster
on the SSD MobileNet v2 body.

Where the CPU lacks the instructions one log line says so and the run is
float32. A float32 run is untouched: no rewrite is added to its session.
"""
import os

from absl import logging
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow_estimator.python.estimator import run_config as rc_lib

# What stays float32, taken off the rewrite's lists (TensorFlow 2.15's
# oneDNN lists, auto_mixed_precision_lists.h) through its environment
# variables TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_<LIST>_REMOVE, which only
# the rewrite reads (float32 runs never run it). bench/NOTES.md, "bfloat16".
_FLOAT32_OPS = {
    # Depthwise convolutions: in bfloat16 the tiny SSD (MobileNet v2 x0.25)
    # reached a non-finite loss by its third step, and they were no faster.
    'ALLOWLIST': ('DepthwiseConv2dNative',
                  'DepthwiseConv2dNativeBackpropFilter',
                  'DepthwiseConv2dNativeBackpropInput'),
    # Batch norms and element-wise arithmetic: memory bound, and TF's
    # bfloat16 element-wise kernels were slower than float32's on an
    # AVX-512 BF16 CPU (SSD MobileNet v2 step 1.16x instead of 1.07x).
    'INFERLIST': ('Add', 'AddN', 'AddV2', 'AvgPool', 'AvgPoolGrad',
                  'BiasAdd', 'BiasAddGrad', 'BiasAddV1', 'Elu', 'EluGrad',
                  'Erf', 'FloorDiv', 'FusedBatchNormV2',
                  'FusedBatchNormGradV2', 'FusedBatchNormV3',
                  'FusedBatchNormGradV3', '_FusedBatchNormEx', 'LeakyRelu',
                  'LeakyReluGrad', 'Log', 'Log1p', 'LogSoftmax', 'Mul', 'Prod',
                  'RealDiv', 'Reciprocal', 'Rsqrt', 'Selu', 'SeluGrad',
                  'Sigmoid', 'SigmoidGrad', 'Softmax', 'Softplus',
                  'SoftplusGrad', 'Softsign', 'SoftsignGrad', 'Sqrt',
                  'Square', 'SquaredDifference', 'Sub', 'TanhGrad'),
    'CLEARLIST': ('Relu', 'ReluGrad', 'Relu6', 'Relu6Grad'),
}
_REMOVE = 'TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_%s_REMOVE'

# /proc/cpuinfo flags of the instructions oneDNN's bfloat16 kernels use.
CPU_FLAGS = ('avx512_bf16', 'amx_bf16')
# The commands' --bfloat16 flag.
FLAG_HELP = ('Train and evaluate in bfloat16 where the CPU has bfloat16 '
             'instructions (AVX-512 BF16 or AMX), as train_config.'
             'use_bfloat16 asks; variables and summed losses stay float32. Off '
             'such CPUs: float32, said in one log line.')


def cpu_flags(cpuinfo_path='/proc/cpuinfo'):
  """The CPU's feature flags (empty where /proc/cpuinfo is unreadable)."""
  try:
    with open(cpuinfo_path) as f:
      for line in f:
        if line.startswith('flags'):
          return set(line.split(':', 1)[1].split())
  except OSError:
    pass
  return set()


def cpu_has_bfloat16():
  """True when this CPU has bfloat16 instructions oneDNN uses."""
  return bool(cpu_flags() & set(CPU_FLAGS))


def available(asked_by, otherwise):
  """True when this CPU has bfloat16 instructions; else one log line.

  Args:
    asked_by: what asked for bfloat16, for the message (e.g. '--bfloat16').
    otherwise: what runs instead, for the message (e.g. 'running in
      float32').
  """
  if cpu_has_bfloat16():
    return True
  logging.warning('bfloat16 asked for (%s), but this CPU has no bfloat16 '
                  'instructions (%s): %s.', asked_by, ' or '.join(CPU_FLAGS),
                  otherwise)
  return False


def enabled(requested, use_tpu):
  """Whether this run's sessions get the bfloat16 rewrite.

  Args:
    requested: --bfloat16 or train_config.use_bfloat16.
    use_tpu: on TPU, bfloat16 is model_fn's bfloat16 scope instead.
  """
  if not requested or use_tpu:
    return False
  if not available('--bfloat16 or train_config.use_bfloat16',
                   'running in float32'):
    return False
  logging.info('bfloat16: training and evaluation sessions run the oneDNN '
               'bfloat16 rewrite; variables and summed losses stay '
               'float32.')
  return True


def keep_float32_ops():
  """Takes _FLOAT32_OPS off the rewrite's lists (their environment
  variables, read by the rewrite alone; other entries there are kept)."""
  for name, ops in _FLOAT32_OPS.items():
    removed = [op for op in os.environ.get(_REMOVE % name, '').split(',')
               if op]
    os.environ[_REMOVE % name] = ','.join(
        removed + [op for op in ops if op not in removed])


def session_config(config=None):
  """A copy of `config` (else the Estimator's default session config) with
  the oneDNN bfloat16 rewrite on."""
  keep_float32_ops()
  rewritten = tf.compat.v1.ConfigProto()
  rewritten.CopyFrom(config or rc_lib.get_default_session_config())
  rewrite_options = rewritten.graph_options.rewrite_options
  rewrite_options.auto_mixed_precision_onednn_bfloat16 = (
      rewriter_config_pb2.RewriterConfig.ON)
  return rewritten


def run_config(config, requested, use_tpu):
  """`config` (a RunConfig), with the rewrite in its session config when
  bfloat16 is requested and this CPU runs it; else `config` itself."""
  if not enabled(requested, use_tpu):
    return config
  return config.replace(session_config=session_config(config.session_config))
