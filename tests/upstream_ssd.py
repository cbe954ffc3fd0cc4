"""The original's SSD sample configs, each built once and run on random images.

Shared by tests/test_upstream_ssd_configs.py (the configs built as training
graphs) and tests/test_upstream_ssd_inference_configs.py (the others): the
two halves of one check, in two modules so that pytest-xdist's workers
(each takes a whole module) share the work. Training and inference graphs
alternate between configs, in file name order, to bound the run time.
Each is built at a reduced input size, except the configs of the released
zoo checkpoints (tests/zoo_checkpoints.py): they keep their own, whose
anchor count those checks know, and the same build serves both checks.
The session runs without grappler.

One predicted graph per distinct predicting part: configs that differ only
outside the model (training, evaluation, graph rewriter) or only in the
model.ssd fields that the loss, the target assignment and the
post-processing alone read (_OUTSIDE_PREDICT; SSDMetaArch.preprocess and
predict read none of them) share one graph, built and run once in the
module of the first of them. What the shared graph proves for each of them:
its feature extractor, box predictor, anchors, resizer and background
class build and predict finite boxes and classes for every anchor, in the
mode the build chose. Each config's whole model (its loss, target
assigner and post-processing included) is still built from its own config
(model_builder.build, no graph: a few milliseconds).
The graph of a predict key with a quantized config (graph_rewriter) is
built for inference, and after its prediction ran it gets that config's
evaluation rewrite, as model_lib applies it; what the rewrite left is
checked by test_quantized_config_builds_its_rewritten_graph.
od_estimator provides every feature extractor type the configs name.
"""
import collections
import functools
import os

import numpy as np
import tensorflow as tf

from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.core import box_predictor
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.config import config_util
from od_estimator.protos import model_pb2
from od_estimator.utils import graph_building
from tests import plain_session
from tests import quantized_layers
from tests import upstream_folder
from tests import zoo_checkpoints


@functools.lru_cache(maxsize=None)
def _parsed_configs(path):
  return config_util.get_configs_from_pipeline_file(path)


def _parsed_model_config(path):
  return _parsed_configs(path)['model']


def graph_rewriter(path):
  """The config's graph_rewriter (a quantization rewrite), or None."""
  return _parsed_configs(path).get('graph_rewriter_config')


def is_ssd(path):
  return _parsed_model_config(path).WhichOneof('model') == 'ssd'


def is_efficientdet(path):
  model = _parsed_model_config(path)
  return model.WhichOneof('model') == 'ssd' and (
      model.ssd.feature_extractor.type.startswith('ssd_efficientnet'))


SSD_CONFIGS = [path for path in upstream_folder.paths() if is_ssd(path)]
REDUCED_SIZE = 128
# The ResNet FPN extractors take 129 pixels and up: the next multiple of 32.
RESNET_FPN_SIZE = 160
# The model.ssd fields that only the loss, the target assignment and the
# post-processing read (ssd_model_builder._build_loss, the target assigner,
# post_processing_builder): the predicted graph does not depend on them.
_OUTSIDE_PREDICT = (
    'loss', 'post_processing', 'matcher', 'similarity_calculator',
    'encode_background_as_zeros', 'negative_class_weight',
    'normalize_loss_by_num_matches', 'normalize_loc_loss_by_codesize',
    'use_confidences_as_targets', 'implicit_example_weight')


def _predict_key(model_config, size):
  """What the predicted graph of `model_config` at `size` depends on."""
  key = model_pb2.DetectionModel()
  key.CopyFrom(model_config)
  for field in _OUTSIDE_PREDICT:
    key.ssd.ClearField(field)
  return key.SerializeToString(deterministic=True), size


@functools.lru_cache(maxsize=None)
def _first_of_key():
  """{predict key: the first of the TF1 folder's SSD configs with it}."""
  first = {}
  for path in SSD_CONFIGS:
    first.setdefault(_predict_key(*_as_built(path)), path)
  return first


@functools.lru_cache(maxsize=None)
def _rewriter_of_key():
  """{predict key: the graph_rewriter of the TF1 folder's one config of
  that key that has one}: its inference graph is rewritten too."""
  rewriters = {}
  for path in SSD_CONFIGS:
    if graph_rewriter(path) is not None:
      key = _predict_key(*_as_built(path))
      assert key not in rewriters, path  # one rewrite per graph
      rewriters[key] = graph_rewriter(path)
  return rewriters


def is_training(path):
  """Whether the config is built as a training graph: every other config
  in file name order, those of one predict key as the first of them;
  never those of a key with a quantized config (its build also checks the
  evaluation rewrite, which needs the inference graph)."""
  key = _predict_key(*_as_built(path))
  if key in _rewriter_of_key():
    return False
  return SSD_CONFIGS.index(_first_of_key()[key]) % 2 == 0


def zoo_name(path):
  """The zoo model the config is the recipe of, or None."""
  name = os.path.splitext(os.path.basename(path))[0]
  return name if name in zoo_checkpoints.FULL_MODELS else None


def _shrink(ssd_config):
  """Smaller fixed input where the config allows it (anchors follow)."""
  resizer = ssd_config.image_resizer
  kind = resizer.WhichOneof('image_resizer_oneof')
  if ssd_config.feature_extractor.type == 'embedded_ssd_mobilenet_v1':
    return resizer.fixed_shape_resizer.height  # it requires its 256x256
  if kind == 'fixed_shape_resizer':
    size = REDUCED_SIZE
    extractor_type = ssd_config.feature_extractor.type
    if extractor_type.startswith('ssd_resnet'):
      size = RESNET_FPN_SIZE
    elif extractor_type.startswith('ssd_inception_v3'):
      size = 256  # deeper strides need a larger input for their top levels
    resizer.fixed_shape_resizer.height = size
    resizer.fixed_shape_resizer.width = size
    return size
  if kind == 'keep_aspect_ratio_resizer' and (
      resizer.keep_aspect_ratio_resizer.pad_to_max_dimension):
    # A square input (EfficientDet's): 128 is a multiple of every stride up
    # to 2**7, the top BiFPN level. Names and shapes do not depend on it.
    resizer.keep_aspect_ratio_resizer.min_dimension = REDUCED_SIZE
    resizer.keep_aspect_ratio_resizer.max_dimension = REDUCED_SIZE
    return REDUCED_SIZE
  return None


Built = collections.namedtuple('Built', [
    'model_config',  # as built (input size included)
    'shapes',  # {variable name: shape}
    'class_shape',  # static shape of the class predictions
    'boxes', 'classes', 'anchors',  # predicted on one random image
    'training',  # built as a training graph
    'graph', 'model', 'variables',  # {name: variable}; None unless kept
    'quantized',  # QuantizedGraph after the rewrite, or None
], defaults=(None,))

# What the evaluation rewrite of a quantized config left in its inference
# graph (after the prediction ran): the layers the predictions depend on,
# (their number, the names of those whose weights / outputs are not
# fake-quantized) and the names of the global variables.
QuantizedGraph = collections.namedtuple('QuantizedGraph', [
    'num_layers', 'unquantized_weights', 'unquantized_outputs', 'names'])


def _as_built(path):
  """(a copy of the config's model as built, the input size)."""
  model_config = model_pb2.DetectionModel()
  model_config.CopyFrom(_parsed_model_config(path))
  if zoo_name(path):
    size = model_config.ssd.image_resizer.fixed_shape_resizer.height
  else:
    size = _shrink(model_config.ssd) or REDUCED_SIZE
  return model_config, size


_BUILDS = {}  # (predict key, training, keep_graph): Built


def built(path, training=None, keep_graph=False):
  """The config's model, built and predicted once per process.

  Configs of the same predict key (_predict_key) and mode share one build,
  made from the config of the first of them asked for.

  Args:
    path: the config.
    training: build the training graph; None: is_training(path) (a config
      of the TF1 folder).
    keep_graph: keep the graph, model and variables in the result (for
      tests that go on using them; the others let the graph go).
  """
  model_config, size = _as_built(path)
  if training is None:
    training = is_training(path)
  predict_key = _predict_key(model_config, size)
  key = (predict_key, training, keep_graph)
  if key not in _BUILDS:
    rewriter = None
    if not (training or keep_graph) and path in SSD_CONFIGS:
      rewriter = _rewriter_of_key().get(predict_key)
    _BUILDS[key] = _build(model_config, size, training, keep_graph, rewriter)
  return _BUILDS[key]


def _build(model_config, size, training, keep_graph, rewriter=None):
  """Builds the model config at `size`; predicts on one random image; then
  applies the evaluation `rewriter` (a graph_rewriter config) if given."""
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    model = model_builder.build(model_config, is_training=training)
    images = tf.random.uniform([1, size, size, 3], 0, 255)
    preprocessed, true_shapes = model.preprocess(images)
    predictions = model.predict(preprocessed, true_shapes)
    variables = tf.compat.v1.global_variables()
    shapes = {v.op.name: v.shape.as_list() for v in variables}
    assert len(shapes) == len(variables)
    class_predictions = predictions[
        box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]
    with plain_session.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      boxes, classes, anchors = sess.run([
          predictions[box_predictor.BOX_ENCODINGS], class_predictions,
          predictions['anchors']])
    quantized = (_rewrite(rewriter, predictions) if rewriter is not None
                 else None)
  kept = ((graph, model, {v.op.name: v for v in variables}) if keep_graph
          else (None, None, None))
  return Built(model_config, shapes, class_predictions.shape.as_list(),
               boxes, classes, anchors, training, *kept,
               quantized=quantized)


def _rewrite(rewriter, predictions):
  """Rewrites the default graph as model_lib does for evaluation / export;
  returns its QuantizedGraph."""
  graph_rewriter_builder.build(rewriter, is_training=False)()
  layers = quantized_layers.prediction_layers(
      [predictions[box_predictor.BOX_ENCODINGS],
       predictions[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]])
  return QuantizedGraph(len(layers), *quantized_layers.unquantized(layers), {
      var.op.name for var in tf.compat.v1.global_variables()})


def check_builds_and_predicts(path, training=None, keep_graph=False):
  """The config's model builds and predicts boxes and classes for every
  anchor."""
  model_config, _ = _as_built(path)
  assert (model_config.ssd.feature_extractor.type in
          ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS), path
  model = built(path, training, keep_graph)
  with tf.Graph().as_default():  # its own loss and post-processing too
    model_builder.build(model_config, is_training=model.training)
  num_anchors = model.anchors.shape[0]
  num_class_slots = model_config.ssd.num_classes + (
      1 if model_config.ssd.add_background_class else 0)
  assert model.boxes.shape == (1, num_anchors, 4)
  assert model.classes.shape == (1, num_anchors, num_class_slots)
  assert np.isfinite(model.boxes).all() and np.isfinite(model.classes).all()


def add_tests(namespace, keep):
  """Puts the tests below into a test module, for the configs keep() chooses.

  Args:
    namespace: the test module's globals().
    keep: predicate on a config path.
  """
  def pytest_generate_tests(metafunc):
    if 'path' in metafunc.fixturenames:
      metafunc.parametrize('path', upstream_folder.params(
          keep=lambda path: is_ssd(path) and keep(path)))
    if 'quantized_path' in metafunc.fixturenames:
      metafunc.parametrize('quantized_path', upstream_folder.params(
          keep=lambda path: is_ssd(path) and keep(path) and
          graph_rewriter(path) is not None))
    if 'zoo_path' in metafunc.fixturenames:
      metafunc.parametrize('zoo_path', upstream_folder.params(
          keep=lambda path: is_ssd(path) and keep(path) and
          zoo_name(path) is not None))
  namespace['pytest_generate_tests'] = pytest_generate_tests
  tests = [test_ssd_config_builds_and_predicts,
           test_zoo_model_variables_match_the_original,
           test_zoo_model_holds_the_zoo_checkpoint_entries,
           test_zoo_model_anchors_and_class_outputs]
  if any(keep(path) and graph_rewriter(path) is not None
         for path in SSD_CONFIGS):  # (no test without a config: no skip)
    tests.append(test_quantized_config_builds_its_rewritten_graph)
  for test in tests:
    namespace[test.__name__] = test


# The tests add_tests puts into the two test modules: `path` is each SSD
# config kept, `zoo_path` each zoo model among them, `quantized_path` each
# config among them with a graph_rewriter.


def test_ssd_config_builds_and_predicts(path):
  check_builds_and_predicts(path)


def test_zoo_model_variables_match_the_original(zoo_path):
  zoo_checkpoints.check_variables(zoo_name(zoo_path), built(zoo_path).shapes)


def test_zoo_model_holds_the_zoo_checkpoint_entries(zoo_path):
  zoo_checkpoints.check_checkpoint_entries(zoo_name(zoo_path),
                                           built(zoo_path).shapes)


def test_zoo_model_anchors_and_class_outputs(zoo_path):
  zoo_checkpoints.check_anchors_and_class_outputs(
      zoo_name(zoo_path), built(zoo_path).class_shape)


def test_quantized_config_builds_its_rewritten_graph(quantized_path):
  """After the evaluation rewrite every convolution that the predictions
  depend on reads fake-quantized weights and its output is fake-quantized
  (tests/test_upstream_quantized_configs.py)."""
  quantized = built(quantized_path).quantized
  assert quantized.num_layers > 20
  assert not quantized.unquantized_weights
  assert not quantized.unquantized_outputs
  assert [n for n in quantized.names if n.endswith('/act_quant/min')]
  assert [n for n in quantized.names if n.endswith('/weights_quant/max')]
