"""Every sample config with a graph_rewriter builds its quantized graph.

For each of the original's configs carrying `graph_rewriter { quantization
}` (MobileNet v1/v2, FPN-lite, MobileNet EdgeTPU, ...): the model predicts
at a reduced input size, then the config's rewrite runs as model_lib runs
it: the evaluation / export rewrite for every config, the training rewrite
(range updates, quant_delay switch; ~10x the ops, so ~10x the build time)
for the first one with residual blocks. Graph building only, nothing is
executed. Every convolution that the predictions depend on then reads
fake-quantized weights and its output is fake-quantized.
"""
import pytest
import tensorflow as tf

from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.core import box_predictor
from od_estimator.config import config_util
from od_estimator.utils import graph_building
from tests import upstream_folder

_LAYER_TYPES = ('Conv2D', 'DepthwiseConv2dNative', 'MatMul')
_FAKE_QUANT = 'FakeQuantWithMinMaxVars'
# The original's rewrite skipped the weight-shared predictor tower's layers
# (convolution -> Identity -> batch norm per level: layer_matching's
# _skip_activation), so they stay float in the fpnlite config too.
_SKIPPED_BY_THE_ORIGINAL = '/PredictionTower/'
# Ops between a layer and its quantizer: bias, folding, batch-to-space,
# activations, residual adds and the quant-delay switch.
_MAX_HOPS = 6
_REDUCED_SIZE = 128  # the ranges and layers do not depend on it


def _has_graph_rewriter(path):
  return 'graph_rewriter_config' in config_util.get_configs_from_pipeline_file(
      path)


QUANTIZED_CONFIGS = [path for path in upstream_folder.paths()
                     if _has_graph_rewriter(path)]
# Its training rewrite is checked too (residual adds in its blocks).
_TRAINING_CHECKED = next(
    (path for path in QUANTIZED_CONFIGS
     if config_util.get_configs_from_pipeline_file(path)[
         'model'].ssd.feature_extractor.type == 'ssd_mobilenet_v2'), None)


def _upstream_layers(tensors):
  """The convolution / matmul ops the tensors depend on (not gradients)."""
  seen, stack, layers = set(), [t.op for t in tensors], []
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    if op.type in _LAYER_TYPES:
      layers.append(op)
    stack.extend(t.op for t in op.inputs)
  return layers


def _reaches_fake_quant(start_ops, step):
  """Whether a FakeQuant is within _MAX_HOPS ops along `step`."""
  frontier = list(start_ops)
  for _ in range(_MAX_HOPS):
    if any(op.type == _FAKE_QUANT for op in frontier):
      return True
    frontier = [nxt for op in frontier for nxt in step(op)]
  return any(op.type == _FAKE_QUANT for op in frontier)


def _producers(op):
  return [t.op for t in op.inputs]


def _consumers(op):
  return [c for t in op.outputs for c in t.consumers()]


def test_the_folder_has_the_quantized_sample_configs(upstream_configs):
  assert len(QUANTIZED_CONFIGS) >= 9, upstream_configs
  assert _TRAINING_CHECKED, 'no quantized ssd_mobilenet_v2 config'


@pytest.mark.parametrize('path',
                         upstream_folder.params(keep=_has_graph_rewriter))
def test_quantized_config_builds_its_rewritten_graph(path):
  is_training = path == _TRAINING_CHECKED
  configs = config_util.get_configs_from_pipeline_file(path)
  model_config = configs['model']
  resizer = model_config.ssd.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = _REDUCED_SIZE
  with tf.Graph().as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=is_training)
    images = tf.compat.v1.placeholder(
        tf.float32, [1, _REDUCED_SIZE, _REDUCED_SIZE, 3])
    predictions = model.predict(*model.preprocess(images))
    graph_rewriter_builder.build(configs['graph_rewriter_config'],
                                 is_training=is_training)()
    outputs = [predictions[box_predictor.BOX_ENCODINGS],
               predictions[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]]
    # Training-time folding keeps each batch-norm'd convolution unfolded
    # too, for the batch statistics only: not a layer of the predictions.
    layers = [op for op in _upstream_layers(outputs)
              if not all(c.type.startswith('FusedBatchNorm')
                         for c in _consumers(op)) and
              _SKIPPED_BY_THE_ORIGINAL not in op.name]
    names = {var.op.name for var in tf.compat.v1.global_variables()}
    delayed = [op for op in tf.compat.v1.get_default_graph().get_operations()
               if op.name.endswith('/delayed_quant')]
  assert len(layers) > 20
  unquantized_weights = [op.name for op in layers if not _reaches_fake_quant(
      [op.inputs[1].op], _producers)]
  unquantized_outputs = [op.name for op in layers if not _reaches_fake_quant(
      [op], _consumers)]
  assert not unquantized_weights
  assert not unquantized_outputs
  assert [n for n in names if n.endswith('/act_quant/min')]
  assert [n for n in names if n.endswith('/weights_quant/max')]
  if is_training:  # moving-average ranges, zero-debiased as the original's
    assert [n for n in names if 'act_quant/' in n and n.endswith('/biased')]
    # Float until fake_quantization_step reaches the config's delay.
    assert bool(delayed) == (
        configs['graph_rewriter_config'].quantization.delay > 0)
