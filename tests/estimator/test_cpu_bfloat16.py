"""bfloat16 off TPU (estimator/cpu_bfloat16.py): train_config.use_bfloat16
and --bfloat16 on a CPU with bfloat16 instructions, float32 elsewhere.

One tiny SSD training graph (tiny_ssd's, LIGHT_OVERRIDES, on the fake
backbone of tests/fakes.py: a 1x1 convolution; the box predictor's are
real), built by the model_fn of a run asking for bfloat16, runs STEPS
steps in a float32
session and in a session running the rewrite of the run's session config,
from the same weights on the same batch. Grappler's other passes are left
out of both (as every test session, tests/plain_session.py): over the whole
training graph they took most of 20 minutes on a loaded 2-core machine.
"""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_estimator.python.estimator import run_config as rc_lib

from od_estimator.config import config_util
from od_estimator.estimator import cpu_bfloat16
from od_estimator.estimator import model_lib
from od_estimator.models import ssd_feature_extractor_registry
from tests import fakes
from tests import log_capture
from tests import plain_session
from tests import tiny_ssd
from tests.command_modules import run_command

STEPS = 3
# The fake backbone's two feature maps, and anchors for two.
FAKE_BACKBONE = ','.join([
    'model.ssd.feature_extractor.type=fake',
    'model.ssd.feature_extractor.num_layers=2',
    'model.ssd.anchor_generator.ssd_anchor_generator.num_layers=2'])
# What the Estimator runs its sessions with when the RunConfig has none.
DEFAULT_SESSION_CONFIG = rc_lib.get_default_session_config()
HAS_BFLOAT16 = cpu_bfloat16.cpu_has_bfloat16()
needs_bfloat16 = pytest.mark.skipif(
    not HAS_BFLOAT16, reason='this CPU has no bfloat16 instructions')


@pytest.fixture(scope='module', autouse=True)
def fake_backbone():
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS,
                  'fake', fakes.FakeSSDFeatureExtractor)
    yield


@pytest.fixture(scope='module')
def config(tmp_path_factory):
  root = tmp_path_factory.mktemp('bfloat16')
  return tiny_ssd.write_config(root, root / 'data')


def _parts(config, model_dir, config_override=None, **kwargs):
  """create_estimator_and_inputs on the tiny SSD (fake backbone); its
  bfloat16 notes."""
  hparams = dict(config_util.parse_hparams_overrides(
      tiny_ssd.LIGHT_OVERRIDES + ',' + FAKE_BACKBONE), load_pretrained=False)
  with log_capture.absl_messages() as messages:
    parts = model_lib.create_estimator_and_inputs(
        tiny_ssd.run_config(model_dir), pipeline_config_path=config,
        hparams=hparams, config_override=config_override, **kwargs)
  return parts, [m for m in messages if m.startswith('bfloat16')]


def _no_bfloat16_cpu(monkeypatch):
  monkeypatch.setattr(cpu_bfloat16, 'cpu_flags', lambda: {'avx512f'})


def _rewrites(session_config):
  return session_config is not None and (
      session_config.graph_options.rewrite_options.
      auto_mixed_precision_onednn_bfloat16)


def test_float32_run_keeps_its_session_config(config, tmp_path):
  parts, notes = _parts(config, tmp_path)
  assert parts['estimator'].config.session_config == DEFAULT_SESSION_CONFIG
  assert not notes


@needs_bfloat16
@pytest.mark.parametrize('asked', [
    {'bfloat16': True},
    {'config_override': 'train_config { use_bfloat16: true }'}])
def test_flag_or_config_adds_the_rewrite(config, tmp_path, asked):
  parts, notes = _parts(config, tmp_path, **asked)
  assert _rewrites(parts['estimator'].config.session_config)
  assert len(notes) == 1 and 'stay float32' in notes[0], notes


def test_cpu_without_bfloat16_runs_float32_and_says_so(
    config, tmp_path, monkeypatch):
  _no_bfloat16_cpu(monkeypatch)
  parts, notes = _parts(config, tmp_path, bfloat16=True)
  assert parts['estimator'].config.session_config == DEFAULT_SESSION_CONFIG
  assert len(notes) == 1 and 'running in float32' in notes[0], notes


def test_cpu_flags_read_from_cpuinfo(tmp_path):
  cpuinfo = tmp_path / 'cpuinfo'
  cpuinfo.write_text('processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\n')
  assert cpu_bfloat16.cpu_flags(str(cpuinfo)) == {'fpu', 'avx512f',
                                                  'avx512_bf16'}
  assert cpu_bfloat16.cpu_flags(str(tmp_path / 'missing')) == set()


def test_session_config_copies_the_given_one():
  given = tf.compat.v1.ConfigProto(allow_soft_placement=True,
                                   device_count={'CPU': 2})
  rewritten = cpu_bfloat16.session_config(given)
  assert _rewrites(rewritten) and rewritten.device_count['CPU'] == 2
  assert not _rewrites(given)
  assert cpu_bfloat16.session_config().allow_soft_placement


def _bfloat16_nodes(run_metadata):
  """Op types of the nodes the session ran in bfloat16."""
  return sorted({node.op for graph in run_metadata.partition_graphs
                 for node in graph.node
                 if node.attr['T'].type == tf.bfloat16.as_datatype_enum})


def _rewrite_only(session_config):
  """session_config's grappler passes cut to the bfloat16 rewrite."""
  assert _rewrites(session_config)
  config = tf.compat.v1.ConfigProto()
  config.CopyFrom(session_config)
  config.graph_options.rewrite_options.optimizers[:] = [
      'auto_mixed_precision_onednn_bfloat16']
  return config


def _train(graph, spec, batch, session_config, saver, weights):
  """STEPS steps on `batch` from `weights` (a checkpoint); (losses,
  bfloat16 op types of the first)."""
  losses = []
  with graph.as_default(), plain_session.with_grappler(), \
      tf.compat.v1.Session(config=session_config) as session:
    saver.restore(session, weights)
    session.run(tf.compat.v1.local_variables_initializer())
    metadata = tf.compat.v1.RunMetadata()
    for step in range(STEPS):
      loss, _ = session.run(
          [spec.loss, spec.train_op], feed_dict=batch,
          options=tf.compat.v1.RunOptions(output_partition_graphs=True)
          if step == 0 else None,
          run_metadata=metadata if step == 0 else None)
      losses.append(loss)
  return losses, _bfloat16_nodes(metadata)


@pytest.fixture(scope='module')
def runs(config, tmp_path_factory):
  """The training graph of a --bfloat16 run, trained in float32 and in
  bfloat16 from the same weights on the same batch.

  Returns {'graph_def', 'float32': (losses, bfloat16 ops),
  'bfloat16': (losses, bfloat16 ops)}.
  """
  model_dir = tmp_path_factory.mktemp('model')
  parts, _ = _parts(config, model_dir, bfloat16=True)
  session_config = parts['estimator'].config.session_config
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(0)
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        parts['train_input_fn'](params={})).get_next()
    spec = parts['estimator'].model_fn(features, labels,
                                       tf.estimator.ModeKeys.TRAIN,
                                       parts['estimator'].config)
    tensors = tf.nest.flatten((features, labels))
    saver = tf.compat.v1.train.Saver()
    with plain_session.session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      values = session.run(tensors)
      weights = saver.save(session, str(model_dir / 'initial'))
  batch = dict(zip(tensors, values))
  return {'graph_def': graph.as_graph_def(),
          'float32': _train(graph, spec, batch, plain_session.config(), saver,
                            weights),
          'bfloat16': _train(graph, spec, batch,
                             _rewrite_only(session_config), saver, weights)}


@needs_bfloat16
def test_graph_is_built_in_float32(runs):
  types = {value.type for node in runs['graph_def'].node
           for value in node.attr.values()}
  assert tf.bfloat16.as_datatype_enum not in types


@needs_bfloat16
def test_float32_session_runs_nothing_in_bfloat16(runs):
  assert runs['float32'][1] == []


@needs_bfloat16
def test_bfloat16_session_convolves_in_bfloat16(runs):
  assert any('Conv2D' in op for op in runs['bfloat16'][1]), runs['bfloat16']


@needs_bfloat16
def test_bfloat16_session_keeps_element_wise_ops_float32(runs):
  # The graph's activations and batch norm (the fake backbone's) and the
  # predictor's bias adds, left float32 by cpu_bfloat16's lists.
  built = {node.op for node in runs['graph_def'].node}
  kept = {op for ops in cpu_bfloat16._FLOAT32_OPS.values() for op in ops}  # pylint: disable=protected-access
  assert {'Relu6', 'BiasAdd'} <= built & kept, sorted(built & kept)
  assert not kept & set(runs['bfloat16'][1]), runs['bfloat16'][1]


@needs_bfloat16
def test_bfloat16_losses_close_to_float32(runs):
  float32_losses, bfloat16_losses = runs['float32'][0], runs['bfloat16'][0]
  assert np.isfinite(bfloat16_losses).all()
  # Same weights and batch: bfloat16's 8-bit mantissa, ~0.4% per value.
  np.testing.assert_allclose(bfloat16_losses[0], float32_losses[0],
                             rtol=0.02)
  np.testing.assert_allclose(bfloat16_losses, float32_losses, rtol=0.05)


@pytest.mark.parametrize('command', ['model_main', 'model_tpu_main',
                                     'model_main_tf2'])
def test_commands_offer_the_flag(command):
  result = run_command(command, ['--help'])
  assert result.returncode == 0
  assert '--[no]bfloat16' in result.stdout
