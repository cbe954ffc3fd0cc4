"""`validate --check_tpu`: a passing config, and a failing one per reason.

The passing case is the demo config with its real MobileNet v2 (at 64x64).
The failing cases that need the training step, and the quantization-aware
one (whose step also restores a fine_tune_checkpoint), use the tiny fake
feature extractor (tests/fakes.py) to stay fast; the TPU problems they
carry are in the config's other parts, which are real.
"""
import functools
import re

import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from od_estimator.checks import tpu_check
from od_estimator import validate
from od_estimator.models import ssd_feature_extractor_registry as registry
from tests import fakes
from tests import tiny_ssd

# (pattern, replacement): the demo config at test size, 64x64 and depth
# 0.25, batch 8 = 8 shards x 1.
SMALL_DEMO = (
    (r'fixed_shape_resizer \{ height: \d+ width: \d+ \}',
     'fixed_shape_resizer { height: 64 width: 64 }'),
    (r'depth_multiplier: [\d.]+', 'depth_multiplier: 0.25'),
    (r'batch_size: \d+', 'batch_size: 8'))
# Then the fake backbone, with two feature maps.
FAKE_MODEL = ((r'type: "ssd_mobilenet_v2"', 'type: "fake" num_layers: 2'),
              (r'num_layers: 6', 'num_layers: 2'))


@pytest.fixture(scope='module')
def demo_text(tmp_path_factory):
  """The demo config pointed at tiny synthetic data, at test size."""
  root = tmp_path_factory.mktemp('check_tpu')
  with open(tiny_ssd.write_config(root, root / 'data')) as f:
    return _substitute(f.read(), SMALL_DEMO)


class PythonOpFeatureExtractor(fakes.FakeSSDFeatureExtractor):
  """The fake backbone, scaled by a factor that Python computes."""

  def extract_features(self, preprocessed_inputs):
    scale = tf.py_function(lambda: tf.constant(1.0), [], tf.float32)
    scale.set_shape([])
    return [scale * feature_map for feature_map in
            super().extract_features(preprocessed_inputs)]


@pytest.fixture(autouse=True)
def fake_extractors(monkeypatch):
  monkeypatch.setitem(registry.SSD_FEATURE_EXTRACTORS, 'fake',
                      fakes.FakeSSDFeatureExtractor)
  monkeypatch.setitem(registry.SSD_FEATURE_EXTRACTORS, 'fake_python_op',
                      PythonOpFeatureExtractor)
  monkeypatch.setitem(registry.SSD_FEATURE_EXTRACTORS, 'fake_batch_norm',
                      functools.partial(fakes.FakeSSDFeatureExtractor,
                                        use_batch_norm=True))


def _substitute(text, patterns):
  for pattern, replacement in patterns:
    text, count = re.subn(pattern, replacement, text, count=1)
    assert count == 1, pattern
  return text


def _edit(text, replacements):
  for old, new in replacements:
    assert old in text, old
    text = text.replace(old, new, 1)
  return text


def _run(tmp_path, capsys, text, *flags):
  path = tmp_path / 'pipeline.config'
  path.write_text(text)
  code = cli.main(['validate', '--pipeline_config_path=%s' % path,
                   '--check_tpu'] + list(flags))
  return code, capsys.readouterr().out


def _errors(out):
  return [line for line in out.splitlines() if line.startswith('error: ')]


ALLOW = ('--allow_local_paths',)


def test_demo_config_passes_with_local_paths_allowed(demo_text, tmp_path,
                                                     capsys):
  code, out = _run(tmp_path, capsys, demo_text, '--allow_local_paths')
  assert code == 0, out
  assert 'TPU: batch 8 = 8 shard(s) x 1' in out
  assert 'XLA compiles the step' in out
  assert '--allow_local_paths: accepted 4 path(s)' in out
  assert out.strip().endswith(': OK')


def test_quantization_aware_config_compiles_and_restores(
    demo_text, tmp_path, capsys, monkeypatch):
  """The graph_rewriter's FakeQuant ops and delay conds compile with XLA,
  and scaffold_fn restores a matching fine_tune_checkpoint.

  On the fake backbone with a batch-norm'd convolution: the rewrite folds it
  (batch statistics in training) and quantizes it and the box predictor's
  layers, the op types a MobileNet's rewrite has, in a far smaller step.
  The same step (one built) restores from a classification checkpoint,
  which holds the backbone without FeatureExtractor/.
  """
  checkpoint = _write_checkpoint(tmp_path, {
      'mock_model/layer1/weights': [1, 1, 3, 8],
      'mock_model/layer1/BatchNorm/beta': [8],
      'mock_model/layer1/BatchNorm/gamma': [8],
      'mock_model/layer1/BatchNorm/moving_mean': [8],
      'mock_model/layer1/BatchNorm/moving_variance': [8]})
  recorded = []
  step_ops = tpu_check._step_ops  # pylint: disable=protected-access

  def recording_step_ops(output):
    recorded.extend(step_ops(output))
    return recorded
  monkeypatch.setattr(tpu_check, '_step_ops', recording_step_ops)
  text = _edit(_substitute(demo_text, FAKE_MODEL), (
      ('type: "fake"', 'type: "fake_batch_norm"'),
      ('batch_size: 8', 'batch_size: 8 fine_tune_checkpoint: "%s" '
       'fine_tune_checkpoint_type: "classification"' % checkpoint)))
  code, out = _run(tmp_path, capsys, text + (
      'graph_rewriter { quantization { delay: 2 } }\n'), *ALLOW)
  assert code == 0, out
  assert 'note: graph_rewriter: quantization-aware training' in out
  assert 'XLA compiles the step' in out
  # The convolution's weights and its batch norm's 4 of the 22 backbone
  # variables (with optimizer slots, averages and quantization ranges).
  assert "scaffold_fn restores 5 of the 22 variables a 'classification'" in out
  # The step XLA converted holds the rewrite: fake quantization with its
  # gradient, the quant_delay switch and the folded batch norm's statistics.
  step_op_types = {op.type for op in recorded}
  assert [op for op in recorded if op.type == 'Conv2D' and
          op.name.endswith('_Fold')]
  for op_type in ('FakeQuantWithMinMaxVars',
                  'FakeQuantWithMinMaxVarsGradient', 'FusedBatchNormV3'):
    assert op_type in step_op_types, op_type
  assert {'If', 'StatelessIf', 'Switch'} & step_op_types


def _write_checkpoint(directory, shapes):
  """A checkpoint of the variables {name: shape}; returns its prefix."""
  prefix = str(directory / 'checkpoint' / 'model.ckpt')
  with tf.Graph().as_default():
    for name, shape in shapes.items():
      tf.compat.v1.get_variable(name, shape)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, prefix)
  return prefix


# Reason -> (edits of the fake-model config, flags, [words one error line
# must contain, per error expected], words of which every error line
# contains one: the config has no other problem). '{tmp}' is the test's
# directory, '{checkpoint}' a checkpoint whose only variable is
# unrelated/weights. The problems found on a built step (its tensors of
# unknown shape, the two kinds of op XLA rejects) share one config, one step
# built: each is named on its own line.
FAILING = {
    'infeed_shape_undefined': (
        (('max_number_of_boxes: 8\n}\n\neval_config',
          'max_number_of_boxes: 8\n  drop_remainder: false\n}\n\n'
          'eval_config'),), ALLOW,
        [['train_input_reader.drop_remainder',
          "features['image'] has shape [?, 64, 64, 3]", 'and 11 more']],
        ('TPU infeed: ',)),
    'step_shape_undefined_and_ops_xla_rejects': (
        (('weighted_sigmoid_focal { gamma: 2.0 alpha: 0.25 }',
          'weighted_sigmoid {}'),
         ('classification_weight: 1.0',
          'hard_example_miner { num_hard_examples: 10 iou_threshold: 0.99 '
          'loss_type: CLASSIFICATION max_negatives_per_positive: 3 }\n'
          'classification_weight: 1.0'),
         ('type: "fake"', 'type: "fake_python_op"'),
         ('random_horizontal_flip {} }', 'random_horizontal_flip {} }\n'
          '  summarize_gradients: true')), ALLOW,
        [['TPU step: Where makes tensors of unknown shape: `',
          'boolean_mask/Where:0` [?, 1]', 'hard_example_miner'],
         ['XLA cannot compile EagerPyFunc ops in the TPU training step: `',
          'tf.py_function'],
         ['XLA cannot compile HistogramSummary ops', '`gradients/',
          'and ', 'summarize_gradients']],
        ('hard_example_miner', 'XLA cannot compile')),
    'batch_not_divisible_by_shards': (
        (('batch_size: 8', 'batch_size: 12'),), ALLOW,
        [['train_config.batch_size', '12 is not divisible by --num_shards=8',
          'e.g. 8 or 16']], ('train_config.batch_size',)),
    'checkpoint_missing': (
        (('batch_size: 8', 'batch_size: 8 fine_tune_checkpoint: '
          '"{tmp}/nowhere/model.ckpt"'),), ALLOW,
        [['train_config.fine_tune_checkpoint', 'model.ckpt.index not found']],
        ('train_config.fine_tune_checkpoint',)),
    'checkpoint_without_matching_variables': (
        (('batch_size: 8', 'batch_size: 8 fine_tune_checkpoint: '
          '"{checkpoint}" fine_tune_checkpoint_type: "detection"'),), ALLOW,
        [['train_config.fine_tune_checkpoint', '(detection): only 0 of the 2 '
          'variables', 'unrelated/weights']],
        ('train_config.fine_tune_checkpoint',)),
}


@pytest.mark.parametrize('reason', list(FAILING))
def test_failing_config_names_its_reason(demo_text, tmp_path, capsys,
                                         reason):
  edits, flags, expected, every_line = FAILING[reason]
  checkpoint = (_write_checkpoint(tmp_path, {'unrelated/weights': [3]}) if
                reason == 'checkpoint_without_matching_variables' else '')
  edits = tuple((old, new.replace('{tmp}', str(tmp_path)).replace(
      '{checkpoint}', checkpoint)) for old, new in edits)
  code, out = _run(tmp_path, capsys,
                   _edit(_substitute(demo_text, FAKE_MODEL), edits), *flags)
  assert code == 1, out
  assert 'Traceback' not in out
  errors = _errors(out)
  for words in expected:
    assert any(all(word in line for word in words) for line in errors), out
  assert len(errors) == len(expected), out  # one line per problem
  assert all(any(word in line for word in every_line) for line in errors), out


def test_local_paths_each_on_its_own_line(demo_text, tmp_path, capsys):
  # No step is built: the batch does not split, so this stays cheap.
  text = _edit(_substitute(demo_text, FAKE_MODEL),
               (('batch_size: 8', 'batch_size: 4'),))
  code, out = _run(tmp_path, capsys, text,
                   '--model_dir=%s' % (tmp_path / 'model'))
  assert code == 1
  errors = _errors(out)
  for where in ('--model_dir',
                'train_input_reader.tf_record_input_reader.input_path',
                'train_input_reader.label_map_path',
                'eval_input_reader[0].tf_record_input_reader.input_path',
                'eval_input_reader[0].label_map_path'):
    assert sum(where in line and 'is not a gs:// path' in line
               for line in errors) == 1, (where, out)
  # Nothing else but the batch that does not split.
  assert all('is not a gs:// path' in line or
             'train_config.batch_size' in line for line in errors), out
  assert 'TPU training step not built' in out


def test_tpu_flags_need_check_tpu(tmp_path):
  with pytest.raises(SystemExit) as exit_info:
    validate.main(['--pipeline_config_path=%s' % (tmp_path / 'x'),
                   '--num_shards=4'])
  assert exit_info.value.code == 2


def test_help_describes_check_tpu(capsys):
  with pytest.raises(SystemExit):
    validate.main(['--help'])
  out = capsys.readouterr().out
  for flag in ('--check_tpu', '--num_shards', '--model_dir',
               '--allow_local_paths', 'XLA'):
    assert flag in out


def test_dynamic_shape_origins_skips_batch_norm_scratch():
  with tf.Graph().as_default() as graph:
    boxes = tf.compat.v1.placeholder(tf.float32, [4, 3])
    kept = tf.gather(boxes, tf.where(boxes[:, 0] > 0)[:, 0])
    tf.compat.v1.nn.fused_batch_norm(
        tf.reshape(boxes, [1, 1, 4, 3]), tf.ones([3]), tf.zeros([3]))
  origins = tpu_check.dynamic_shape_origins(graph.get_operations())
  assert [(t.op.type, followers) for t, followers in origins] == [
      ('Where', 2)]
  assert kept.shape.as_list() == [None, 3]
