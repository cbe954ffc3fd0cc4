"""Every sample config with a graph_rewriter builds its quantized graph.

For each of the original's configs carrying `graph_rewriter { quantization
}` (MobileNet v1/v2, FPN-lite, MobileNet EdgeTPU, ...): the model predicts
at a reduced input size, then the config's evaluation / export rewrite
runs as model_lib runs it. Graph building only, nothing is executed. Every
convolution that the predictions depend on then reads fake-quantized
weights and its output is fake-quantized. The training rewrite (range
updates, quant_delay switch; ~10x the ops, so ~10x the build time) is
checked the same way on the tiny SSD MobileNet v2 (residual blocks,
depthwise box predictor) in tests/builders/test_graph_rewriter_builder.py.
"""
import pytest
import tensorflow as tf

from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.core import box_predictor
from od_estimator.config import config_util
from od_estimator.utils import graph_building
from tests import quantized_layers
from tests import upstream_folder

_REDUCED_SIZE = 128  # the ranges and layers do not depend on it


def _has_graph_rewriter(path):
  return 'graph_rewriter_config' in config_util.get_configs_from_pipeline_file(
      path)


QUANTIZED_CONFIGS = [path for path in upstream_folder.paths()
                     if _has_graph_rewriter(path)]


def test_the_folder_has_the_quantized_sample_configs(upstream_configs):
  assert len(QUANTIZED_CONFIGS) >= 9, upstream_configs


@pytest.mark.parametrize('path',
                         upstream_folder.params(keep=_has_graph_rewriter))
def test_quantized_config_builds_its_rewritten_graph(path):
  configs = config_util.get_configs_from_pipeline_file(path)
  model_config = configs['model']
  resizer = model_config.ssd.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = _REDUCED_SIZE
  with tf.Graph().as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=False)
    images = tf.compat.v1.placeholder(
        tf.float32, [1, _REDUCED_SIZE, _REDUCED_SIZE, 3])
    predictions = model.predict(*model.preprocess(images))
    graph_rewriter_builder.build(configs['graph_rewriter_config'],
                                 is_training=False)()
    layers = quantized_layers.prediction_layers(
        [predictions[box_predictor.BOX_ENCODINGS],
         predictions[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]])
    names = {var.op.name for var in tf.compat.v1.global_variables()}
  assert len(layers) > 20
  unquantized_weights, unquantized_outputs = quantized_layers.unquantized(
      layers)
  assert not unquantized_weights
  assert not unquantized_outputs
  assert [n for n in names if n.endswith('/act_quant/min')]
  assert [n for n in names if n.endswith('/weights_quant/max')]
