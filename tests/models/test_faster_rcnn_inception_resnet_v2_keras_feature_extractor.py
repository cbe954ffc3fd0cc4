"""The TF2 Mask R-CNN's Keras Inception-ResNet v2 and its TF2 checkpoints.

One training graph per module: the original's TF2 sample config
(mask_rcnn_inception_resnet_v2_1024x1024, type
faster_rcnn_inception_resnet_v2_keras) at 64x64 with 8 proposals, trained
STEPS steps on one generated image with a box and its mask. Its names,
shapes and object paths are checked against the original's
(tests/data/tf2_checkpoint_keys/), and checkpoints laid out as the
original writes them (tests/tf2_checkpoints.py; value i + 1 for the i-th)
are read into it: a classification one, and the model of a process that
had built it before (Keras numbered its layers on: `conv2d_363` where a
first build says `conv2d_160`), so nothing but the object path tells the
layers apart. Loaded from the original's layout with the values of
tests/seeded_values, the backbone computes the original's features
(tests/data/tf2_detections/). exporter_main_v2's checkpoint/ckpt-0 of it
has the original's keys. The heads' TF2 names are not this module's.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.estimator import fine_tune
from od_estimator.estimator import object_checkpoint
from od_estimator.export import original_object_paths
from od_estimator.models import faster_rcnn_feature_extractor as base
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import faster_rcnn_inception_resnet_v2_keras_feature_extractor as irv2_keras
from od_estimator.nets import inception_resnet_v2_keras
from od_estimator.utils import checkpoint_contents
from od_estimator.utils import graph_building
from tests import plain_session
from tests import seeded_values
from tests import tf2_checkpoints
from tests import upstream_folder

CONFIG = 'mask_rcnn_inception_resnet_v2_1024x1024_coco17_gpu-8'
SIZE = 64
STEPS = 1
_SCOPES = (base.FIRST_STAGE_SCOPE, base.SECOND_STAGE_SCOPE)
_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
# The original's features with values by tests/seeded_values.
_FEATURES = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'data', 'tf2_detections',
                         CONFIG + '.features.npz')
# The first op of the second stage, which reads the crops.
_SECOND_STAGE_INPUT = ('SecondStageFeatureExtractor/InceptionResnetV2/'
                       'Mixed_7a/Branch_0/Conv2d_0a_1x1/Conv2D')


def _model_config():
  config = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path(CONFIG, tf2=True))['model']
  frcnn = config.faster_rcnn
  resizer = frcnn.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = SIZE
  frcnn.first_stage_max_proposals = frcnn.second_stage_batch_size = 8
  return config


class Built:
  """The module's model, graph, variables and training losses."""

  def __init__(self):
    self.graph = tf.Graph()
    with self.graph.as_default(), graph_building.identity_equality():
      tf.compat.v1.set_random_seed(1)
      self.model = model_builder.build(_model_config(), is_training=True)
      mask = np.zeros([1, SIZE, SIZE], np.float32)
      mask[0, 10:40, 20:50] = 1.0
      self.model.provide_groundtruth(
          [tf.constant([[10, 20, 40, 50]], tf.float32) / SIZE],
          [tf.one_hot([3], 90)], groundtruth_masks_list=[tf.constant(mask)])
      self.images = tf.random.uniform([1, SIZE, SIZE, 3], 0.0, 255.0,
                                      seed=1)
      preprocessed, shapes = self.model.preprocess(self.images)
      self.prediction = self.model.predict(preprocessed, shapes)
      self.crops = self.graph.get_operation_by_name(
          _SECOND_STAGE_INPUT).inputs[0]
      total = tf.add_n(list(self.model.loss(self.prediction, shapes).values()))
      # Without slot variables, which would join the stages' variables.
      train_op = tf.compat.v1.train.GradientDescentOptimizer(1e-4).minimize(
          total)
      self.backbone = {v.op.name: v for v in tf.compat.v1.global_variables()
                       if v.op.name.startswith(_SCOPES)}
      kernel = self.backbone[
          'SecondStageFeatureExtractor/InceptionResnetV2/conv_7b/kernel']
      # One session for the module's tests: each first run of another
      # session on this graph converts all of it again.
      self.session = plain_session.session()
      sess = self.session
      sess.run(tf.compat.v1.global_variables_initializer())
      before = sess.run(kernel)
      self.losses = [sess.run([train_op, total])[1] for _ in range(STEPS)]
      self.kernel_change = np.abs(sess.run(kernel) - before).max()

  def restored(self, prefix, available, fetches, feed_dict=None):
    """fetches after restoring `available` ({key: variable}) from prefix.

    With one restore op for them all, as fine-tuning on TPU restores its
    map (init_from_checkpoint, its CPU path, adds two ops per variable).
    """
    with self.graph.as_default():
      tf.compat.v1.train.Saver(available).restore(self.session, prefix)
    return self.session.run(fetches, feed_dict)


@pytest.fixture(scope='module')
def built():
  model = Built()
  yield model
  model.session.close()


def _seeded_value(fact):
  return seeded_values.value(fact.key, fact.shape)


@pytest.fixture(scope='module')
def written(tmp_path_factory):
  """write(facts name) -> (prefix, lines); each written once.

  The classification checkpoint holds the values of _FEATURES
  (tests/seeded_values), the others value i + 1 for their i-th.
  """
  folder = tmp_path_factory.mktemp('irv2_checkpoints')
  cache = {}

  def write(name):
    if name not in cache:
      lines = tf2_checkpoints.facts(CONFIG + name)
      value_fn = (_seeded_value if name == '.classification' else
                  tf2_checkpoints.indexed_values(lines))
      cache[name] = (tf2_checkpoints.write(str(folder / name), lines,
                                           value_fn), lines)
    return cache[name]
  return write


def _backbone_facts(name):
  """{object path: fact} of the backbone's values in facts `name`."""
  return {fact.key[:-len(_SUFFIX)]: fact for fact in tf2_checkpoints.facts(
      CONFIG + name) if fact.key.startswith(
          object_checkpoint.PARTS['classification']) and
          '/.OPTIMIZER_SLOT/' not in fact.key}


def test_registry_type():
  assert (faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS[
      'faster_rcnn_inception_resnet_v2_keras'] is
          irv2_keras.FasterRCNNInceptionResnetV2KerasFeatureExtractor)


def test_it_trains(built):
  assert np.all(np.isfinite(built.losses)), built.losses
  assert built.kernel_change > 0


def test_second_stage_pads_same_as_the_original(built):
  # 17 x 17 crops: 'SAME' reductions give 9 x 9 (the slim extractor's
  # 'VALID' ones 8 x 8), as the original's Keras model.
  assert built.prediction['rpn_features_to_crop'].shape.as_list() == [
      1, SIZE // 16, SIZE // 16, 1088]
  assert built.prediction['box_classifier_features'].shape.as_list() == [
      8, 9, 9, 1536]


def test_features_are_the_originals(built, written):
  # A classification checkpoint of the original's layout holding the values
  # its features were recorded with; the same image and crops.
  expected = np.load(_FEATURES)
  prefix, _ = written('.classification')
  with built.graph.as_default():
    available = fine_tune.restore_map(
        built.model, tf2_checkpoints.train_config(prefix, 'classification'))
  # Both features depend on the backbone's values only (crops are fed).
  assert sorted(v.op.name for v in available.values()) == sorted(
      built.backbone)
  rpn_features, box_features = built.restored(
      prefix, available, [built.prediction['rpn_features_to_crop'],
                          built.prediction['box_classifier_features']],
      {built.images: seeded_values.image(SIZE, SIZE)[np.newaxis],
       built.crops: seeded_values.value('crops', built.crops.shape)})
  np.testing.assert_allclose(rpn_features[..., :64],
                             expected['rpn_features'], rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(box_features[..., :8],
                             expected['box_classifier_features'],
                             rtol=1e-4, atol=1e-4)


def test_names_shapes_and_object_paths_are_the_originals(built):
  # The facts' Keras names are those of a process that built the model
  # once, which ours are.
  facts = _backbone_facts('')
  paths = irv2_keras.original_object_paths(built.backbone)
  assert len(paths) == len(built.backbone) == len(facts) == 896
  ours = {paths[name][0]: (name.split('/', 2)[2],
                           variable.shape.as_list())
          for name, variable in built.backbone.items()}
  assert ours == {path: (fact.keras_name, fact.shape)
                  for path, fact in facts.items()}
  classification = {paths[name][1]: variable.shape.as_list()
                    for name, variable in built.backbone.items()}
  assert classification == {path: fact.shape for path, fact in
                            _backbone_facts('.classification').items()}
  # exporter_main_v2 writes checkpoint/ckpt-0 under these paths.
  assert original_object_paths.original_paths(list(built.backbone)) == {
      name: detection for name, (detection, _) in paths.items()}
  # The proposal features end with the block17 stack.
  assert inception_resnet_v2_keras.FIRST_STAGE_LAYERS == 342
  assert (inception_resnet_v2_keras.LAYERS[341].name,
          inception_resnet_v2_keras.LAYERS[342].name) == (
              'block17_20_conv', 'conv2d_160')


def test_exported_checkpoint_has_the_originals_keys(built, tmp_path):
  """exporter_main_v2's checkpoint/ckpt-0: every value at the original's
  object path (its recorded keys), the heads' under their TF2 names, and
  our fine-tuning reads it back."""
  keys = tf2_checkpoints.write_exported(built.graph, built.model,
                                        _model_config(), str(tmp_path))
  facts = {fact.key: fact.keras_name for fact in tf2_checkpoints.model_lines(
      tf2_checkpoints.facts(CONFIG))}
  assert sorted(keys) == sorted(facts)
  heads = {key: name for key, name in keys.items()
           if not name.startswith(_SCOPES)}
  assert len(heads) == len(facts) - 896
  assert heads == {key: facts[key] for key in heads}


@pytest.mark.parametrize('kind, name, root', [
    ('classification', '.classification', 'feature_extractor/'),
    ('classification', '.built_twice', 'model/_feature_extractor_for_'),
    ('detection', '.built_twice', 'model/_feature_extractor_for_'),
])
def test_restores_with_nothing_skipped(built, written, kind, name, root):
  prefix, _ = written(name)
  matched, wanted = tf2_checkpoints.match(built.graph, built.model, prefix,
                                          kind)
  assert (matched.missing, matched.mismatched, matched.left_out) == (
      [], [], [])
  assert sorted(v.op.name for v in matched.available.values()) == sorted(
      built.backbone)
  assert len(wanted) == len(built.backbone)
  assert all(key.startswith(root) for key in matched.available)


def test_full_restores_the_whole_model(built, written):
  # The heads too, by their TF2 names (predictors/two_stage_keras_names),
  # which Keras numbered in this second model of its process.
  prefix, _ = written('.built_twice')
  matched, wanted = tf2_checkpoints.match(built.graph, built.model, prefix,
                                          'full')
  assert (matched.missing, matched.mismatched, matched.left_out) == (
      [], [], [])
  restored = {v.op.name for v in matched.available.values()}
  assert set(built.backbone) < restored and len(restored) == len(wanted)
  assert any(key.startswith('model/_mask_rcnn_box_predictor/_third_stage_')
             for key in matched.available)


def test_each_layer_reads_the_value_at_its_object_path(built, written):
  # The renumbered Keras names would put them elsewhere.
  prefix, lines = written('.built_twice')
  expected = {fact.key: i + 1 for i, fact in enumerate(lines)}
  with built.graph.as_default():
    available = fine_tune.restore_map(
        built.model, tf2_checkpoints.train_config(prefix, 'detection'))
  keys = sorted(available)
  values = built.restored(prefix, available,
                          [available[key] for key in keys])
  assert len(keys) == 896
  assert [value.flat[0] for value in values] == [expected[key]
                                                 for key in keys]
  paths = irv2_keras.original_object_paths(built.backbone)
  assert {key: v.op.name for key, v in available.items()} == {
      paths[name][0] + _SUFFIX: name for name in built.backbone}


def test_a_whole_model_restore_reads_the_backbone_by_path(built, written):
  # As evaluation and export read a TF2 checkpoint of the model.
  prefix, _ = written('.built_twice')
  with built.graph.as_default():
    variables = list(built.backbone.values())
  keys = object_checkpoint.whole_model_keys(
      variables, checkpoint_contents.read(prefix))
  paths = irv2_keras.original_object_paths(built.backbone)
  assert {key: v.op.name for key, v in keys.items()} == {
      paths[name][0] + _SUFFIX: name for name in built.backbone}


def test_output_stride_8_is_refused_by_name():
  # The original's Keras model fails at 8 (Mixed_7a mixes strides).
  with pytest.raises(errors.UserInputError,
                     match=r'first_stage_features_stride.*'
                     r'FasterRCNNInceptionResnetV2KerasFeatureExtractor '
                     r'cannot produce stride 8; supported: 16'):
    irv2_keras.FasterRCNNInceptionResnetV2KerasFeatureExtractor(True, 8)


def test_keras_names_of_slim_variables():
  name = inception_resnet_v2_keras.keras_variable_name
  assert name('Conv2d_1a_3x3/weights') == 'conv2d/kernel'
  assert name('Mixed_5b/Branch_2/Conv2d_0a_1x1/BatchNorm/beta') == (
      'freezable_batch_norm_8/beta')
  assert name('Repeat/block35_1/Conv2d_1x1/biases') == 'block35_1_conv/bias'
  assert name('Block8/Conv2d_1x1/weights') == 'block8_10_conv/kernel'
  assert name('Conv2d_7b_1x1/BatchNorm/moving_mean') == (
      'conv_7b_bn/moving_mean')
  with pytest.raises(ValueError, match='no variable of the Keras'):
    name('Logits/weights')
