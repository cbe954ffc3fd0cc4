"""EfficientDet (ssd_efficientnet-b<N>_bifpn_keras): names, restores, training.

Our D0 graph (the original's sample config with 3 classes at 256x256, the
size its detections were recorded at; variable shapes do not depend on the
size) has the variables of the original's TF2 model, Keras names and shapes
(tests/data/tf2_checkpoint_keys/ssd_efficientdet_d0_*), but its
classification head; a checkpoint laid out as the original writes it
restores into it with nothing skipped for each fine-tuning kind, and with
the values of tests/seeded_values.py our graph gives the original's
detections (tests/data/tf2_detections/; tolerance as in
tests/estimator/test_tf2_detections.py, but for the boxes these values
blow up and the suppression of their ties). A tiny
EfficientDet (EfficientNet-B0 at width x0.25, 64x64, levels 3..6, 16 BiFPN
filters) trains two steps through model_fn on shapes records, as the D0
config says, and a tiny BiFPN two steps per combine method.
D0 is the one EfficientDet sample config that
tests/test_upstream_efficientdet_configs.py does not build: its build and
prediction are checked here (names, restores, detections). The other
seven build there.
"""
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator import errors
from od_estimator.builders import hyperparams_builder
from od_estimator.builders import model_builder
from od_estimator.checks import tpu_check
from od_estimator.config import config_util
from od_estimator.estimator import model_lib
from od_estimator.export import original_object_paths
from od_estimator.estimator import moving_averages
from od_estimator.input_pipeline import inputs
from od_estimator.models import bifpn
from od_estimator.utils import graph_building
from tests import plain_session
from tests import seeded_detections
from tests import seeded_values
from tests import tf2_checkpoints
from tests import tiny_ssd
from tests import upstream_folder

D0 = 'ssd_efficientdet_d0_512x512_coco17_tpu-8'
RECORDED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), 'data', 'tf2_detections', D0 + '.npz')
NUM_CLASSES = 3
SIZE = 256
D0_OVERRIDE = ('model { ssd { num_classes: %d image_resizer { '
               'fixed_shape_resizer { height: %d width: %d } } } }' % (
                   NUM_CLASSES, SIZE, SIZE))
TOLERANCE = 2e-4
# The original's checkpoints keep the EfficientNet classifier's head, which
# the detector does not use and we do not build.
CLASSIFICATION_HEAD = ('top_conv2d/', 'top_bn/', 'logits/')
_PREDICTOR = 'WeightSharedConvolutionalBoxPredictor/'


def _model_config(size, text=''):
  model_config = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path(D0, tf2=True), text)['model']
  resizer = model_config.ssd.image_resizer.keep_aspect_ratio_resizer
  resizer.min_dimension = resizer.max_dimension = size
  return model_config


def _facts(name):
  """The recorded lines, the class predictor's for NUM_CLASSES classes."""
  return tf2_checkpoints.with_num_classes(tf2_checkpoints.facts(name),
                                          NUM_CLASSES, background=False)


def _model_facts(name):
  return {fact.keras_name: fact.shape for fact in _facts(name)
          if fact.key.startswith(('model/', 'feature_extractor/')) and
          '/.OPTIMIZER_SLOT/' not in fact.key}


@pytest.fixture(scope='module')
def d0():
  """(graph, model, {name: variable}, detections) of our D0 inference graph
  on seeded_values.image()."""
  model_config = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path(D0, tf2=True), D0_OVERRIDE)['model']
  graph, model, detections = seeded_detections.build(model_config)
  variables = {v.op.name: v for v in graph.get_collection(
      tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)}
  return graph, model, variables, detections


def test_d0_has_the_originals_names_and_shapes(d0):
  _, _, variables, _ = d0
  ours = {name: v.shape.as_list() for name, v in variables.items()}
  original = _model_facts(D0)
  assert {name: shape for name, shape in original.items()
          if not name.startswith(CLASSIFICATION_HEAD)} == ours
  assert {name for name in original if name.startswith(CLASSIFICATION_HEAD)}
  # The classification checkpoint's backbone is ours, but its head.
  backbone = _model_facts(D0 + '.classification')
  assert all(ours[name] == shape for name, shape in backbone.items()
             if not name.startswith(CLASSIFICATION_HEAD))


def test_d0_object_paths_are_the_originals(d0):
  # The paths exporter_main_v2 writes our variables under, and fine-tuning
  # reads them from.
  _, _, variables, _ = d0
  paths = original_object_paths.original_paths(list(variables))
  suffix = '/.ATTRIBUTES/VARIABLE_VALUE'
  assert {paths[name] + suffix: name for name in variables} == {
      fact.key: fact.keras_name
      for fact in tf2_checkpoints.model_lines(_facts(D0))
      if not fact.keras_name.startswith(CLASSIFICATION_HEAD)}


@pytest.fixture(scope='module')
def written(tmp_path_factory):
  """{facts name: checkpoint prefix}, laid out as the original writes them
  (the model's values, without the optimizer's), values by
  seeded_values.value."""
  folder = tmp_path_factory.mktemp('efficientdet_checkpoints')
  return {name: tf2_checkpoints.write(
      str(folder / name), lines,
      lambda fact: seeded_values.value(fact.key, fact.shape))
          for name, lines in (
              (D0, tf2_checkpoints.model_lines(_facts(D0))),
              (D0 + '.classification', _facts(D0 + '.classification')))}


@pytest.mark.parametrize('kind', ['classification', 'detection', 'full'])
def test_a_d0_checkpoint_of_the_original_restores_with_nothing_skipped(
    d0, written, kind):
  graph, model, variables, _ = d0
  facts_name = D0 + ('.classification' if kind == 'classification' else '')
  matched, wanted = tf2_checkpoints.match(graph, model, written[facts_name],
                                          kind)
  assert (matched.missing, matched.mismatched) == ([], [])
  assert sorted(v.op.name for v in matched.available.values()) == sorted(
      wanted)
  assert set(wanted) == {
      'classification': {name for name in variables if '/bifpn/' not in name
                         and not name.startswith(_PREDICTOR)},
      'detection': {name for name in variables
                    if not name.startswith(_PREDICTOR)},
      'full': set(variables)}[kind]
  # Only the classifier's head is left in the checkpoint.
  left_out = {fact.keras_name for fact in _facts(facts_name)
              if fact.key.split('/.ATTRIBUTES/')[0] in matched.left_out}
  assert len(left_out) == len(matched.left_out) > 0
  assert all(name.startswith(CLASSIFICATION_HEAD) for name in left_out)


def test_d0_gives_the_originals_detections(d0, written):
  graph, _, _, detections = d0
  with plain_session.session(graph) as sess:
    moving_averages.restore(sess, False, written[D0])
    ours = sess.run(detections)
  with np.load(RECORDED) as recorded:
    original = dict(recorded)
  np.testing.assert_allclose(ours['raw_detection_scores'],
                             original['raw_detection_scores'], rtol=0,
                             atol=TOLERANCE)
  # These values give box codes up to ~100, whose exp turns rounding into
  # relative errors of 1e-4 (boxes up to 1e10).
  np.testing.assert_allclose(ours['raw_detection_boxes'],
                             original['raw_detection_boxes'], rtol=1e-3,
                             atol=TOLERANCE)
  # With such boxes, and scores that saturate at 1 and tie, non-max
  # suppression keeps one or two more or fewer: each of the original's
  # detections is one of ours, with its score.
  assert abs(ours['num_detections'][0] - original['num_detections'][0]) <= 2
  ours, original = _by_anchor_and_class(ours), _by_anchor_and_class(
      original)
  assert len(original) > 50 and set(original) <= set(ours)
  for key, score in original.items():
    np.testing.assert_allclose(ours[key], score, rtol=0, atol=TOLERANCE,
                               err_msg=str(key))


def _by_anchor_and_class(detections):
  """{(anchor index, class): score} of the detections."""
  count = int(detections['num_detections'][0])
  return {(int(anchor), int(label)): score for anchor, label, score in zip(
      detections['detection_anchor_indices'][0][:count],
      detections['detection_classes'][0][:count],
      detections['detection_scores'][0][:count])}


# A tiny EfficientDet: EfficientNet-B0 at width x0.25, levels 3..6 at 64x64,
# trained as the D0 config says (its augmentations at 64 pixels, its
# optimizer and schedule) on shapes records.
TINY = """model { ssd {
  num_classes: 3
  image_resizer { keep_aspect_ratio_resizer {
    min_dimension: 64 max_dimension: 64 } }
  anchor_generator { multiscale_anchor_generator { max_level: 6 } }
  box_predictor { weight_shared_convolutional_box_predictor {
    depth: 16 num_layers_before_predictor: 1 } }
  feature_extractor { depth_multiplier: 0.25 bifpn {
    max_level: 6 num_iterations: 2 num_filters: 16 } }
} }
train_config { batch_size: 2 use_bfloat16: false
  optimizer { momentum_optimizer { learning_rate {
    cosine_decay_learning_rate { total_steps: 100 warmup_steps: 1 } } } } }"""
TINY_SIZE = 64


def _tiny_configs(data_dir):
  """The tiny EfficientDet's configs, reading shapes records."""
  pipeline_config = config_util.read_pipeline_config(
      upstream_folder.config_path(D0, tf2=True), TINY)
  train_config = pipeline_config.train_config
  train_config.ClearField('fine_tune_checkpoint')
  for option in train_config.data_augmentation_options:
    if option.HasField('random_scale_crop_and_pad_to_square'):
      option.random_scale_crop_and_pad_to_square.output_size = TINY_SIZE
  train, _, label_map = tiny_ssd.write_data(data_dir, num_train=4,
                                            num_val=1)
  reader = pipeline_config.train_input_reader
  reader.label_map_path = label_map
  reader.tf_record_input_reader.input_path[:] = [train]
  return config_util.create_configs_from_pipeline_proto(pipeline_config)


def test_a_tiny_efficientdet_trains_from_records(tmp_path):
  configs = _tiny_configs(tmp_path)
  model_fn = model_lib.create_model_fn(
      lambda is_training, add_summaries: model_builder.build(
          configs['model'], is_training, add_summaries), configs,
      hparams={'load_pretrained': False})
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        inputs.train_input(configs['train_config'],
                           configs['train_input_config'],
                           configs['model'])).get_next()
    spec = model_fn(features, labels, tf.estimator.ModeKeys.TRAIN, {})
    trainable = tf.compat.v1.trainable_variables()
    with plain_session.session(graph) as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      before = sess.run(trainable)
      losses = [sess.run([spec.loss, spec.train_op])[0] for _ in range(2)]
      after = sess.run(trainable)
      step = sess.run(tf.compat.v1.train.get_global_step())
  assert features['image'].shape.as_list() == [2, TINY_SIZE, TINY_SIZE, 3]
  assert step == 2 and np.all(np.isfinite(losses))
  moved = {v.op.name for v, b, a in zip(trainable, before, after)
           if not np.array_equal(b, a)}
  # Backbone, BiFPN (its 1x1 projections of the backbone levels; the
  # combine weights' first gradients are too small to move them) and both
  # heads learn. 12 combine weights: 2 iterations of 6 combining nodes.
  assert len([v for v in trainable
              if v.op.name.endswith('/bifpn_combine_weights')]) == 12
  assert {'stem_conv2d/kernel',
          'EfficientDet-D0/bifpn/node_01/1_dn_lvl_5/input_0_up_lvl_5/'
          '1x1_pre_sample/conv/kernel'} | {
              'WeightSharedConvolutionalBoxPredictor/WeightSharedConvolutional'
              '%sHead/%sPredictor/%s' % (head, head, weight)
              for head in ('Box', 'Class') for weight in (
                  'depthwise_kernel', 'pointwise_kernel', 'bias')} <= moved


def _train_two_steps(build_loss):
  """Two gradient descent steps on build_loss() (built in a new graph;
  plain steps: a momentum optimizer's slot variables would cost a second
  per graph, and its first step is this one).

  Returns:
    (losses of the two steps, first gradients, trainable variable names,
    their values before and after, the tensors of unknown shape the step
    makes: tpu_check.dynamic_shape_origins).
  """
  graph = tf.Graph()
  with graph.as_default(), graph_building.identity_equality():
    tf.compat.v1.set_random_seed(1)
    loss = build_loss()
    trainable = tf.compat.v1.trainable_variables()
    gradients = tf.gradients(loss, trainable)
    with tf.control_dependencies(
        tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
      train_op = tf.compat.v1.train.GradientDescentOptimizer(
          0.05).apply_gradients(zip(gradients, trainable))
    unknown_shapes = tpu_check.dynamic_shape_origins(graph.get_operations())
    with plain_session.session(graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      before = sess.run(trainable)
      first = sess.run({'loss': loss, 'gradients': gradients,
                        'train': train_op})
      second = sess.run([loss, train_op])[0]
      after = sess.run(trainable)
  return ([first['loss'], second], first['gradients'],
          [v.op.name for v in trainable], before, after, unknown_shapes)


def _batch_normalized_bias(name):
  """A conv bias followed by batch norm (force_use_bias): in training, the
  batch norm takes its effect back out, so its gradient is zero."""
  return re.search(r'(conv|conv2d_\d+)/bias$', name) is not None


def _no_gradient(names, gradients):
  """Variables whose gradient is not finite, or zero though it should not."""
  return [name for name, gradient in zip(names, gradients)
          if not np.all(np.isfinite(gradient)) or
          not (np.any(gradient) or _batch_normalized_bias(name))]


def _still(names, before, after):
  """Variables the steps left as they were (but batch-normalized biases)."""
  return [name for name, b, a in zip(names, before, after)
          if np.array_equal(b, a) and not _batch_normalized_bias(name)]


def _bifpn_loss(combine_method):
  """Squared error of a tiny BiFPN's maps (levels 3..5 in, 3..6 out) to
  random targets."""
  hyperparams = hyperparams_builder.build(
      _model_config(128).ssd.feature_extractor.conv_hyperparams,
      is_training=True, allow_force_use_bias=True)
  features = [tf.random.normal([2, size, size, depth], seed=size)
              for size, depth in ((8, 24), (4, 40), (2, 16))]
  with slim.arg_scope(hyperparams()):
    maps = bifpn.bifpn(features, 3, 6, num_iterations=2, depth=16,
                       combine_method=combine_method,
                       activation_fn=hyperparams.activation_fn)
  assert [m.shape.as_list() for m in maps] == [
      [2, 8, 8, 16], [2, 4, 4, 16], [2, 2, 2, 16], [2, 1, 1, 16]]
  return tf.add_n([tf.reduce_mean(tf.square(
      m - tf.random.normal(m.shape, seed=index)))
                   for index, m in enumerate(maps)])


@pytest.mark.parametrize('combine_method', bifpn.COMBINE_METHODS)
def test_the_bifpn_trains_with_each_combine_method(combine_method):
  losses, gradients, names, before, after, unknown_shapes = (
      _train_two_steps(lambda: _bifpn_loss(combine_method)))
  assert losses[1] < losses[0]
  # A TPU (XLA) needs every shape of the training step known.
  assert unknown_shapes == []
  assert _no_gradient(names, gradients) == []
  assert _still(names, before, after) == []
  combine_weights = [name for name in names
                     if name.endswith('/bifpn_combine_weights')]
  assert len(combine_weights) == (0 if combine_method == 'sum' else 12)
  # force_use_bias: the convs have biases as well as batch norm.
  assert 'bifpn/node_00/0_up_lvl_6/input_0_up_lvl_5/1x1_pre_sample/conv/bias' in names


def test_the_extractor_refuses_what_it_cannot_honour():
  for text, field in (
      ("model { ssd { feature_extractor { bifpn { combine_method: 'max' } } } }",
       'combine_method'),
      ('model { ssd { feature_extractor { use_explicit_padding: true } } }',
       'use_explicit_padding'),
      ('model { ssd { feature_extractor { use_depthwise: true } } }',
       'use_depthwise'),
      ('model { ssd { feature_extractor { '
       'override_base_feature_extractor_hyperparams: true } } }',
       'override_base_feature_extractor_hyperparams'),
      ('model { ssd { feature_extractor { bifpn { min_level: 6 } } } }',
       'min_level')):
    with pytest.raises(errors.UserInputError, match=field):
      model_builder.build(_model_config(128, text), is_training=False)
