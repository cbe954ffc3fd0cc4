"""graph_rewriter_builder: the quantization rewrite of graph_rewriter configs,
on a tiny SSD built from the demo config.

The graphs are built and rewritten with identity hashing
(tests/fast_graphs.py), as model_lib and the exporters build theirs. The
evaluation rewrite (MobileNet v1: names, ranges only read) is checked on
model_main's Servo export in tests/test_quantized_ssd_end_to_end.py, whose
eval-mode graph it is.
"""
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator import errors
from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.core import box_predictor
from od_estimator.protos import graph_rewriter_pb2
from od_estimator.utils import graph_building
from tests import fast_graphs
from tests import quantized_layers
from tests import tiny_ssd


def _config(text):
  return text_format.Parse(text, graph_rewriter_pb2.GraphRewriter())


def _tiny_ssd_graph(is_training):
  """The tiny SSD's graph up to its predictions; (graph, their tensors)."""
  config = tiny_ssd.model_config()
  with fast_graphs.new_graph() as graph:
    model = model_builder.build(config, is_training=is_training)
    images = tf.compat.v1.placeholder(tf.float32, [2, 64, 64, 3])
    predictions = model.predict(*model.preprocess(images))
  return graph, [predictions[box_predictor.BOX_ENCODINGS],
                 predictions[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]]


def _variable_names(graph):
  with graph.as_default():
    return {v.op.name for v in tf.compat.v1.global_variables()}


def test_training_rewrite_of_tiny_ssd_mobilenet_v2():
  is_training = True
  graph, outputs = _tiny_ssd_graph(is_training)
  before = _variable_names(graph)
  rewrite_fn = graph_rewriter_builder.build(
      _config('quantization { delay: 10 weight_bits: 8 activation_bits: 8 }'),
      is_training=is_training)
  with graph.as_default(), graph_building.identity_equality():
    rewrite_fn()
  added = _variable_names(graph) - before
  ranges = {name for name in added if name.endswith(('/min', '/max'))}
  layers = {name.rsplit('/', 1)[0] for name in ranges}
  # Names as the original's quantized checkpoints of SSD MobileNet v2.
  prefix = 'FeatureExtractor/MobilenetV2/'
  for name in (prefix + 'Conv/weights_quant', prefix + 'Conv/act_quant',
               prefix + 'expanded_conv_1/expand/act_quant',
               prefix + 'expanded_conv_1/depthwise/weights_quant',
               prefix + 'expanded_conv_1/project/act_quant',
               prefix + 'expanded_conv_2/project/conv_quant',
               prefix + 'expanded_conv_2/add_quant',
               prefix + 'expanded_conv_2/act_quant',
               prefix + 'layer_19_2_Conv2d_2_3x3_s2_128/act_quant',
               'BoxPredictor_0/BoxEncodingPredictor/weights_quant',
               'BoxPredictor_0/BoxEncodingPredictor/act_quant',
               'BoxPredictor_0/ClassPredictor/act_quant'):
    assert name in layers, name
  assert not {n for n in layers if 'MobilenetV2/MobilenetV2' in n}
  convs = [op for op in graph.get_operations()
           if op.type in ('Conv2D', 'DepthwiseConv2dNative')
           and op.name.endswith('_Fold')]
  # Each reads its weights through weights_quant (behind the delay's cond).
  assert convs and all(op.inputs[1].name.startswith(
      op.name.rsplit('/', 1)[0] + '/weights_quant/') for op in convs)
  # quant_delay counts the original's step variable; EMAs are debiased.
  others = added - ranges
  assert 'fake_quantization_step' in others
  assert all(n.endswith(('/biased', '/local_step'))
             for n in others - {'fake_quantization_step'})
  assert [n for n in others if 'act_quant/' in n and n.endswith('/biased')]
  # Float until fake_quantization_step reaches the delay.
  assert [op for op in graph.get_operations()
          if op.name.endswith('/delayed_quant')]
  # Every layer of the predictions (depthwise box predictor, residual adds
  # included) reads fake-quantized weights; its output is fake-quantized.
  layers = quantized_layers.prediction_layers(outputs)
  assert len(layers) > 20
  assert quantized_layers.unquantized(layers) == ([], [])


@pytest.mark.parametrize('field', ['weight_bits', 'activation_bits'])
def test_bits_other_than_8_refused(field):
  with pytest.raises(errors.UserInputError,
                     match='graph_rewriter.quantization.%s: 16' % field):
    graph_rewriter_builder.build(
        _config('quantization { %s: 16 }' % field), is_training=True)


def test_symmetric_refused():
  with pytest.raises(errors.UserInputError, match='symmetric'):
    graph_rewriter_builder.build(
        _config('quantization { symmetric: true }'), is_training=False)
