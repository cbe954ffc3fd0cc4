"""Fine-tuning from the original's TF2 (object-based) checkpoints.

For the TF2 sample configs that build here. Each checkpoint is written by
tests/tf2_checkpoints.py with the keys and Keras names the original's TF2
code writes (tests/data/tf2_checkpoint_keys/), value i + 1 for its i-th
value (-(i + 1) for optimizer slots, moving averages included), and read
into our graph of the same config, built once per process at the smallest
size it takes (variable shapes do not depend on the image size). The same
facts check the object paths exporter_main_v2 writes our variables under.
Faster R-CNN ResNet-50 (and with a Mask R-CNN head) comes from
tests/tf2_faster_rcnn.py, its detection part being its two stages' Keras
models.

The graphs are those tests/test_upstream_tf2_configs.py builds of the same
configs (tests/upstream_ssd.py, tests/tf2_faster_rcnn.py), so these tests
run in that module (add_tests), in the process that has them.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.estimator import fine_tune
from od_estimator.estimator import moving_averages
from od_estimator.estimator import object_checkpoint
from od_estimator.export import original_object_paths
from od_estimator.utils import checkpoint_contents
from tests import log_capture
from tests import plain_session
from tests import tf2_checkpoints
from tests import tf2_faster_rcnn
from tests import upstream_folder
from tests import upstream_ssd

MOBILENET = 'ssd_mobilenet_v2_320x320_coco17_tpu-8'
RESNET = 'ssd_resnet50_v1_fpn_640x640_coco17_tpu-8'
RESNET101 = 'ssd_resnet101_v1_fpn_640x640_coco17_tpu-8'
RESNET152 = 'ssd_resnet152_v1_fpn_640x640_coco17_tpu-8'
FPNLITE = 'ssd_mobilenet_v2_fpnlite_320x320_coco17_tpu-8'
V1_FPN = 'ssd_mobilenet_v1_fpn_640x640_coco17_tpu-8'
FASTER_RCNN = tf2_faster_rcnn.RESNET50
MASK_RCNN = FASTER_RCNN + tf2_faster_rcnn.MASKS
KINDS = ('classification', 'detection', 'full')

Built = collections.namedtuple('Built', ['name', 'graph', 'model',
                                         'variables'])


def _build(name):
  """Our graph of sample config `name` at a reduced size (an inference
  graph: the training graph's variables): tests/upstream_ssd.py's build of
  it, which test_upstream_tf2_configs checks predicts."""
  ssd = upstream_ssd.built(upstream_folder.config_path(name, tf2=True),
                           training=False, keep_graph=True)
  return Built(name, ssd.graph, ssd.model, ssd.variables)


SSD_CONFIGS = [MOBILENET, RESNET, RESNET101, RESNET152, FPNLITE, V1_FPN]


@pytest.fixture(params=SSD_CONFIGS)
def built(request):
  return _build(request.param)


# The restores: every backbone but ResNet-101/152 FPN, the ResNet-50 one's
# code with more blocks (their names and shapes are checked above).
RESTORED = [name for name in SSD_CONFIGS if name not in (RESNET101, RESNET152)]


@pytest.fixture(params=RESTORED)
def restored(request):
  return _build(request.param)


@pytest.fixture
def mobilenet():
  return _build(MOBILENET)


_value_fn = tf2_checkpoints.indexed_values


@pytest.fixture(scope='module')
def written(tmp_path_factory):
  """write(facts name, lines=None) -> (prefix, lines); each written once."""
  folder = tmp_path_factory.mktemp('tf2_checkpoints')
  cache = {}

  def write(name, lines=None):
    if name not in cache:
      lines = lines or tf2_checkpoints.facts(name)
      cache[name] = (tf2_checkpoints.write(str(folder / name), lines,
                                           _value_fn(lines)), lines)
    return cache[name]
  return write


def _checkpoint_for(config, kind):
  """The facts of the checkpoint a `kind` fine-tuning of `config` reads."""
  return config + ('.classification' if kind == 'classification' else '')


@pytest.mark.parametrize('name', [
    MOBILENET, MOBILENET + '.classification',
    MOBILENET + '.use_moving_average', MOBILENET + '.built_twice',
    RESNET + '.classification', FPNLITE, FPNLITE + '.classification',
    V1_FPN, V1_FPN + '.classification', MASK_RCNN])
def test_written_checkpoints_have_the_originals_keys_and_names(written,
                                                                name):
  prefix, lines = written(name)
  values = checkpoint_contents.read(prefix)
  assert [(v.key, v.keras_name, v.shape, v.dtype) for v in values] == [
      tuple(fact) for fact in lines]
  slots = [v for v in values if v.slot_of]
  assert all(v.key.startswith(v.slot_of + '/.OPTIMIZER_SLOT/')
             for v in slots)
  averaged = {v.slot_of for v in slots if v.slot_name == 'average'}
  trainable = {v.path for v in object_checkpoint.model_values(values)
               if not v.path.endswith(('/moving_mean', '/moving_variance'))}
  assert averaged == (trainable if 'average' in name else set())


def test_our_names_and_shapes_are_the_originals(built):
  model_facts = {fact.keras_name: fact.shape
                 for fact in tf2_checkpoints.facts(built.name)
                 if fact.key.startswith('model/') and
                 '/.OPTIMIZER_SLOT/' not in fact.key}
  assert {name: variable.shape.as_list()
          for name, variable in built.variables.items()
          if name != 'global_step'} == model_facts
  # The backbone of the original's classification checkpoint is ours.
  backbone = {fact.keras_name: fact.shape for fact in tf2_checkpoints.facts(
      built.name + '.classification') if fact.key.startswith(
          'feature_extractor/')}
  assert backbone and all(model_facts.get(name) == shape
                          for name, shape in backbone.items())


def test_exported_object_paths_are_the_originals(built):
  # exporter_main_v2 writes checkpoint/ckpt-0 under these paths.
  names = [name for name in built.variables if name != 'global_step']
  paths = original_object_paths.original_paths(names)
  suffix = '/.ATTRIBUTES/VARIABLE_VALUE'
  assert {paths[name] + suffix: name for name in names} == {
      fact.key: fact.keras_name for fact in tf2_checkpoints.facts(built.name)
      if fact.key.startswith('model/') and
      '/.OPTIMIZER_SLOT/' not in fact.key}


_train_config = tf2_checkpoints.train_config


def _restores_with_nothing_skipped(written, checkpoint, graph, model,
                                   variables, kind, detection_root, heads,
                                   backbone_facts):
  """Matched of `kind`, checked: nothing skipped, the part's variables.

  Args:
    written: the fixture; checkpoint: the facts name it writes.
    graph, model, variables: our built model ({name: variable}).
    kind: fine_tune_checkpoint_type.
    detection_root: object path prefix of the detection part's values.
    heads: name prefixes of the variables outside the detection part.
    backbone_facts: the facts name of the classification checkpoint.
  """
  prefix, _ = written(checkpoint)
  matched, wanted = tf2_checkpoints.match(graph, model, prefix, kind)
  assert (matched.missing, matched.mismatched, matched.left_out) == (
      [], [], [])
  assert sorted(v.op.name for v in matched.available.values()) == sorted(
      wanted)
  root = {'classification': 'feature_extractor/',
          'detection': detection_root, 'full': 'model/'}[kind]
  assert all(key.startswith(root) for key in matched.available)
  model_variables = set(variables) - {'global_step'}
  backbone = {fact.keras_name for fact in tf2_checkpoints.facts(
      backbone_facts) if fact.key != 'save_counter/'
              '.ATTRIBUTES/VARIABLE_VALUE'}
  assert set(wanted) == {
      'classification': backbone,
      'detection': {name for name in model_variables
                    if not name.startswith(heads)},
      'full': model_variables}[kind]
  return matched


@pytest.mark.parametrize('kind', KINDS)
def test_restores_with_nothing_skipped(restored, written, kind):
  _restores_with_nothing_skipped(
      written, _checkpoint_for(restored.name, kind), restored.graph,
      restored.model, restored.variables, kind, 'model/_feature_extractor/',
      ('BoxPredictor/', 'WeightSharedConvolutionalBoxPredictor/'),
      restored.name + '.classification')


def test_classification_from_a_detection_checkpoint(mobilenet, written):
  prefix, _ = written(MOBILENET)
  with mobilenet.graph.as_default():
    matched = fine_tune.match_checkpoint(
        mobilenet.model, _train_config(prefix, 'classification'))
  assert (matched.missing, matched.mismatched) == ([], [])
  assert len(matched.available) == 260
  assert all(key.startswith('model/_feature_extractor/classification_backbone/')
             for key in matched.available)


def _fine_tuned_full(graph, model, prefix):
  """{variable name: value} after a "full" fine-tuning initialization."""
  with graph.as_default():
    available = fine_tune.restore_map(model, _train_config(prefix, 'full'))
    tf.compat.v1.train.init_from_checkpoint(prefix, available)
    variables = list(available.values())
    with plain_session.session() as sess:
      sess.run([v.initializer for v in variables])
      return dict(zip([v.op.name for v in variables], sess.run(variables)))


def test_full_restores_the_raw_weights_not_the_averages(mobilenet, written):
  prefix, lines = written(MOBILENET + '.use_moving_average')
  expected = {fact.keras_name: _value_fn(lines)(fact).flat[0]
              for fact in lines if fact.key.startswith('model/') and
              '/.OPTIMIZER_SLOT/' not in fact.key}
  with log_capture.absl_messages() as messages:
    restored = _fine_tuned_full(mobilenet.graph, mobilenet.model, prefix)
  assert len(restored) == len(expected)
  for name, value in restored.items():
    np.testing.assert_array_equal(value, np.full(value.shape,
                                                 expected[name]))
  assert any('holds moving averages; fine-tuning starts from its raw '
             'weights' in message for message in messages)


@pytest.mark.parametrize('kind', ['detection', 'full'])
def test_a_model_built_twice_restores_by_object_path(mobilenet, written,
                                                     kind):
  # Its added layers' Keras names carry a number ours do not.
  prefix, lines = written(MOBILENET + '.built_twice')
  numbered = {fact.key for fact in lines
              if '_feature_extractor_1/FeatureMaps/' in fact.keras_name}
  assert len(numbered) == 40
  with mobilenet.graph.as_default():
    matched = fine_tune.match_checkpoint(mobilenet.model,
                                         _train_config(prefix, kind))
    wanted = object_checkpoint.wanted_variables(mobilenet.model, kind)
  assert (matched.missing, matched.mismatched, matched.left_out) == (
      [], [], [])
  assert len(matched.available) == len(wanted)
  assert numbered <= set(matched.available)


def test_the_averaged_variables_are_our_trainable_ones(mobilenet):
  averaged = {fact.keras_name[:-len('/average')]
              for fact in tf2_checkpoints.facts(MOBILENET +
                                                '.use_moving_average')
              if fact.key.endswith('/optimizer/average/.ATTRIBUTES/'
                                   'VARIABLE_VALUE')}
  with mobilenet.graph.as_default():
    trainable = {v.op.name for v in tf.compat.v1.trainable_variables()}
  assert trainable == averaged


@pytest.mark.parametrize('use_moving_averages', [True, False])
def test_whole_model_restore_reads_the_averages_when_asked(
    mobilenet, written, use_moving_averages):
  # As evaluation and export restore (moving_averages.restore).
  prefix, lines = written(MOBILENET + '.use_moving_average')
  values = _value_fn(lines)
  by_key = {fact.key: values(fact).flat[0] for fact in lines}
  suffix = '/.ATTRIBUTES/VARIABLE_VALUE'
  with mobilenet.graph.as_default():
    tf.compat.v1.train.get_or_create_global_step()  # As in a training graph.
    trainable = set(tf.compat.v1.trainable_variables())
    expected = {}
    for fact in lines:
      if fact.key.startswith('model/') and '.OPTIMIZER_SLOT' not in fact.key:
        average = fact.key[:-len(suffix)] + '/.OPTIMIZER_SLOT/optimizer/' \
            'average' + suffix
        expected[fact.keras_name] = by_key[fact.key]
        if use_moving_averages and average in by_key:
          expected[fact.keras_name] = by_key[average]
    expected['global_step'] = by_key['step' + suffix]
    variables = tf.compat.v1.global_variables()
    with plain_session.session() as sess:
      moving_averages.restore(sess, use_moving_averages, prefix)
      restored = dict(zip([v.op.name for v in variables],
                          sess.run(variables)))
  assert {name: value.flat[0] if np.ndim(value) else value
          for name, value in restored.items()} == expected
  averaged = [v.op.name for v in trainable if expected[v.op.name] < 0]
  assert len(averaged) == (len(trainable) if use_moving_averages else 0)


def _other_model(lines):
  """The facts with 10 more classes and one more feature map layer."""
  changed = tf2_checkpoints.with_num_classes(lines, 100)
  extra = 'model/_feature_extractor/feature_map_generator/convolutions/6/0/'
  changed.append(tf2_checkpoints.Fact(
      extra + 'kernel/.ATTRIBUTES/VARIABLE_VALUE',
      'ssd_mobile_net_v2_keras_feature_extractor/FeatureMaps/'
      'layer_19_1_Conv2d_6_1x1_64_conv/kernel', [1, 1, 128, 64], 'float32'))
  return changed


def test_other_shapes_are_skipped_and_extra_values_left_out(mobilenet,
                                                           written):
  prefix, _ = written('other_model', _other_model(
      tf2_checkpoints.facts(MOBILENET)))
  with mobilenet.graph.as_default():
    with log_capture.absl_messages() as messages:
      available = fine_tune.restore_map(mobilenet.model,
                                        _train_config(prefix, 'full'))
  log = '\n'.join(messages)
  assert len(available) == 324 - 12
  assert ('skipping 12 variables of another shape (checkpoint vs model): '
          'BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/bias [303] '
          'vs [273], BoxPredictor/ConvolutionalClassHead_0/ClassPredictor/'
          'kernel [1, 1, 576, 303] vs [1, 1, 576, 273],') in log
  assert ('leaving out 1 values of the checkpoint that feed no variable of '
          'this model (`od-estimator inspect_checkpoint` lists them): '
          'model/_feature_extractor/feature_map_generator/convolutions/6/0/'
          'kernel') in log
  assert 'not in the checkpoint' not in log


def test_a_checkpoint_of_another_backbone_is_refused(mobilenet, written):
  # The first values of ResNet50's classification checkpoint.
  prefix, _ = written('resnet_part', tf2_checkpoints.facts(
      RESNET + '.classification')[:20])
  with mobilenet.graph.as_default():
    with pytest.raises(errors.UserInputError,
                       match=r'only 0 of the 260 variables .* It holds 20 '
                       r'variables, e.g. conv1_conv/kernel \[7, 7, 3, 64\]'):
      fine_tune.restore_map(mobilenet.model,
                            _train_config(prefix, 'classification'))


# The heads of the Faster R-CNN models, outside their detection part.
_TWO_STAGE_HEADS = ('RPNConv/', 'FirstStageBoxPredictor/',
                    'mask_rcnn_keras_box_predictor/')


@pytest.mark.parametrize('name,kind', [
    (FASTER_RCNN, kind) for kind in KINDS] + [
        (MASK_RCNN, kind) for kind in KINDS[1:]])
def test_faster_rcnn_restores_with_nothing_skipped(written, name, kind):
  built = tf2_faster_rcnn.built(name)
  matched = _restores_with_nothing_skipped(
      written, _checkpoint_for(name, kind), built.graph, built.model,
      built.variables, kind, 'model/_feature_extractor_for_',
      _TWO_STAGE_HEADS, FASTER_RCNN + '.classification')
  # Each stage holds its own layers: conv5 is the box classifier's alone.
  if kind == 'detection':
    assert {variable.op.name for key, variable in matched.available.items()
            if key.startswith('model/_feature_extractor_for_box_classifier_'
                              'features/')} == {
                                  name for name in built.variables
                                  if name.startswith('conv5_')}


def test_faster_rcnn_full_restore_gives_every_variable_its_value(written):
  built = tf2_faster_rcnn.built(FASTER_RCNN)
  prefix, lines = written(FASTER_RCNN)
  expected = {fact.keras_name: _value_fn(lines)(fact).flat[0]
              for fact in tf2_checkpoints.model_lines(lines)}
  restored = _fine_tuned_full(built.graph, built.model, prefix)
  assert {name: value.flat[0] for name, value in restored.items()} == expected
  assert all(np.all(value == value.flat[0]) for value in restored.values())


def add_tests(namespace):
  """Puts the fixtures and tests above into a test module.

  Args:
    namespace: the test module's globals().
  """
  for name in ('built', 'restored', 'mobilenet', 'written'):
    namespace[name] = globals()[name]
  namespace.update({name: value for name, value in globals().items()
                    if name.startswith('test_')})
