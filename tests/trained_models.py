"""Tiny trained and exported models, built once per test run and shared.

One session fixture per artifact of a model family: the family's tiny model
trained (its model_dir), then what is made from it (its export). conftest.py
registers them, so any test module takes them by name. Under pytest-xdist
each worker is its own process: built_once makes the first worker that asks
build the artifact in a folder shared by the run while the others wait on
its lock, then every worker reads that folder.

The artifacts are READ-ONLY for tests. A test that writes into one (resumes
training, damages a checkpoint, deletes or adds files) copies it first with
shutil.copytree into its tmp_path (a tiny model_dir copies in milliseconds).

A new family adds its fixtures here: one training run shared by the
family's end-to-end tests, and its export beside it.
"""
import contextlib
import fcntl
import functools
import os
import shutil

import pytest
import tensorflow as tf

from od_estimator.config import config_util
from od_estimator.estimator import model_lib
from od_estimator.export import exporter
from tests import command_modules
from tests import fakes
from tests import plain_session
from tests import tiny_context_rcnn
from tests import tiny_efficientdet
from tests import tiny_faster_rcnn
from tests import tiny_faster_rcnn_fpn
from tests import tiny_mask_rcnn
from tests import tiny_resnet
from tests import tiny_rfcn
from tests import tiny_ssd

# Marks a complete artifact: a worker interrupted while building leaves
# none, and the next run's builder starts that folder again.
_DONE = '.built'

# The two-stage families' end-to-end runs: OVERFIT_STEPS Adam steps with
# model_main --random_seed SEED (see tests/test_faster_rcnn_end_to_end.py
# for the measurements behind both numbers).
OVERFIT_STEPS = 80
SEED = 1
# Context R-CNN's run: steps that overfit with several seeds on both CPU
# makes measured (tests/test_context_rcnn_end_to_end.py).
CONTEXT_RCNN_STEPS = 120
# The FPN's run (no calibrated backbone): mAP@.5 1.0 with seeds 1 and 2 at
# 40 steps, 0.17 and 0.5 at 24 on ResNet-50; 1.0 and 0.67 at 40 on the tiny
# ResNet (tests/test_faster_rcnn_fpn_end_to_end.py).
FPN_STEPS = 40
# The tiny EfficientDet D0's run (tests/test_efficientdet_end_to_end.py).
EFFICIENTDET_STEPS = 80


def _run_folder(tmp_path_factory):
  """The folder of this run shared by every xdist worker (or the run's own).

  An xdist worker's base temp folder is <run>/popen-gwN: its parent is the
  run's. Without xdist the base folder is the run's already.
  """
  base = tmp_path_factory.getbasetemp()
  return base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base


@contextlib.contextmanager
def _locked(path):
  with open(path, 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)


def built_once(tmp_path_factory, name, build):
  """The folder `name` that build(folder) filled, once per test run.

  Args:
    tmp_path_factory: pytest's fixture.
    name: the artifact's name (its fixture's), unique in the run.
    build: function of an empty pathlib folder that writes the artifact in
      it. It is built in place: the paths it records (in a pipeline.config,
      a checkpoint state file) stay true.

  Returns:
    The folder, a pathlib.Path, to be read only.
  """
  shared = _run_folder(tmp_path_factory) / 'trained_models'
  shared.mkdir(exist_ok=True)
  folder = shared / name
  with _locked(str(shared / (name + '.lock'))):
    if not (folder / _DONE).exists():
      shutil.rmtree(str(folder), ignore_errors=True)
      folder.mkdir()
      build(folder)
      (folder / _DONE).touch()
  return folder


def _train_one_step_ssd(root):
  config = tiny_ssd.write_config(root, root / 'data')
  # No graph.pbtxt or meta graph: the relaunches write their own.
  parts = model_lib.create_estimator_and_inputs(
      tiny_ssd.run_config(root / 'model'), pipeline_config_path=config,
      save_final_config=True,
      hparams=config_util.parse_hparams_overrides(tiny_ssd.LIGHT_OVERRIDES))
  parts['estimator'].train(parts['train_input_fn'], max_steps=1)


@pytest.fixture(scope='session')
def one_step_tiny_ssd(tmp_path_factory):
  """The light tiny SSD trained one step in-process, once per run.

  For relaunches onto a trained model_dir, exports and evaluations.
  Returns (root, config path, model_dir): the records are in root/data,
  the as-run config (LIGHT_OVERRIDES applied) is model_dir/pipeline.config.
  """
  root = built_once(tmp_path_factory, 'one_step_tiny_ssd', _train_one_step_ssd)
  return root, str(root / 'pipeline.config'), str(root / 'model')


@pytest.fixture(scope='session')
def one_step_tiny_ssd_export(tmp_path_factory, one_step_tiny_ssd):
  """The one-step tiny SSD exported for image_tensor input, once per run.

  exporter's output folder (saved_model/, frozen_inference_graph.pb,
  model.ckpt.*, pipeline.config) of the as-run config and the checkpoint.
  Returns its path (a str).
  """
  return _exported_once(tmp_path_factory, 'one_step_tiny_ssd_export',
                        one_step_tiny_ssd[2])


def _exported_once(tmp_path_factory, name, model_dir,
                   registered=contextlib.nullcontext):
  """model_dir's as-run config and latest checkpoint exported for
  image_tensor input in the folder `name`, once per run (under
  `registered`, the context registering its extractor); its path (a str)."""
  def export(folder):
    with registered():
      exporter.export_inference_graph(
          'image_tensor', config_util.read_pipeline_config(
              os.path.join(model_dir, 'pipeline.config')),
          model_dir, str(folder / 'export'))

  return str(built_once(tmp_path_factory, name, export) / 'export')


def _write_tiny_resnet_backbone(folder):
  tiny_faster_rcnn.write_overfit_backbone(folder, extractor=tiny_resnet.TYPE)


def _overfit_run(tmp_path_factory, name, write_overfit_config,
                 num_steps=OVERFIT_STEPS, calibrated_backbone=True):
  """model_main's overfitting run of a family, once per run; its paths.

  model_main runs in this process (tests/command_modules.py), with grappler
  as users run it, while tests/tiny_resnet.py's extractor is registered:
  the families of the slim ResNet start from one calibrated checkpoint of
  it, written once per run (tiny_faster_rcnn.write_overfit_backbone: the
  same images); without calibrated_backbone, write_overfit_config takes no
  backbone. The family's tests take the extractor (tiny_resnet.registered)
  to export and predict.
  """
  def train(root):
    kwargs = {}
    if calibrated_backbone:
      kwargs['extractor'] = tiny_resnet.TYPE
      kwargs['backbone'] = str(built_once(
          tmp_path_factory, 'overfit_backbone',
          _write_tiny_resnet_backbone) / 'backbone' / 'model.ckpt')
    config = write_overfit_config(root, root / 'data', **kwargs)
    result = command_modules.run_command('model_main', [
        '--pipeline_config_path=' + config,
        '--model_dir=' + str(root / 'model'),
        '--num_train_steps=%d' % num_steps, '--random_seed=%d' % SEED])
    assert result.returncode == 0, result.stderr[-3000:]
  with tiny_resnet.registered(), plain_session.with_grappler():
    root = built_once(tmp_path_factory, name, train)
  model_dir = str(root / 'model')
  return {'root': root, 'model_dir': model_dir,
          'config': os.path.join(model_dir, 'pipeline.config'),
          'checkpoint': tf.train.latest_checkpoint(model_dir)}


@pytest.fixture(scope='session')
def overfit_faster_rcnn(tmp_path_factory):
  """tiny_faster_rcnn's set overfitted by model_main (trained, evaluated).

  Returns {'root' (records in root/data), 'model_dir', 'config' (the
  as-run copy), 'checkpoint'}.
  """
  return _overfit_run(tmp_path_factory, 'overfit_faster_rcnn',
                      tiny_faster_rcnn.write_overfit_config)


@pytest.fixture(scope='session')
def overfit_mask_rcnn(tmp_path_factory):
  """tiny_mask_rcnn's set (PNG masks) overfitted by model_main; as above."""
  return _overfit_run(tmp_path_factory, 'overfit_mask_rcnn',
                      tiny_mask_rcnn.write_overfit_config)


@pytest.fixture(scope='session')
def overfit_rfcn(tmp_path_factory):
  """tiny_rfcn's set (R-FCN's second stage) overfitted by model_main."""
  return _overfit_run(tmp_path_factory, 'overfit_rfcn',
                      tiny_rfcn.write_overfit_config)


@pytest.fixture(scope='session')
def overfit_faster_rcnn_fpn(tmp_path_factory):
  """tiny_faster_rcnn_fpn's run (the set of overfit_faster_rcnn) of
  FPN_STEPS steps by model_main; as above."""
  return _overfit_run(
      tmp_path_factory, 'overfit_faster_rcnn_fpn',
      functools.partial(tiny_faster_rcnn_fpn.write_overfit_config,
                        extractor=tiny_resnet.FPN_TYPE),
      FPN_STEPS, calibrated_backbone=False)


@pytest.fixture(scope='session')
def overfit_efficientdet(tmp_path_factory):
  """tiny_efficientdet's D0 on the set of overfit_faster_rcnn, overfitted
  by model_main in EFFICIENTDET_STEPS steps; as above."""
  return _overfit_run(tmp_path_factory, 'overfit_efficientdet',
                      tiny_efficientdet.write_overfit_config,
                      EFFICIENTDET_STEPS, calibrated_backbone=False)


@pytest.fixture(scope='session')
def overfit_context_rcnn(tmp_path_factory):
  """tiny_context_rcnn's sequence (the set's images as one sequence with
  context features) overfitted by model_main in CONTEXT_RCNN_STEPS steps."""
  return _overfit_run(tmp_path_factory, 'overfit_context_rcnn',
                      tiny_context_rcnn.write_overfit_config,
                      CONTEXT_RCNN_STEPS)


# One Adam step that moves every weight by about the learning rate, and
# moving averages of decay 0.5: after the step each average is halfway
# between the initial and the trained weight, far from both.
AVERAGED_TRAINING = """
train_config { optimizer {
  adam_optimizer { learning_rate {
    constant_learning_rate { learning_rate: 0.01 } } }
  use_moving_average: true moving_average_decay: 0.5
} }
"""


def _train_averaged_ssd(root):
  model_dir = root / 'model'
  parts = model_lib.create_estimator_and_inputs(
      tiny_ssd.run_config(model_dir),
      hparams=config_util.parse_hparams_overrides(tiny_ssd.V1_OVERRIDES),
      pipeline_config_path=tiny_ssd.write_config(root, root / 'data'),
      config_override=AVERAGED_TRAINING, save_final_config=True)
  parts['estimator'].train(parts['train_input_fn'], max_steps=1)


@pytest.fixture(scope='session')
def averaged_tiny_ssd(tmp_path_factory):
  """The tiny SSD (MobileNet v1) trained one step with AVERAGED_TRAINING.

  For tests of fine-tuning from, evaluating and exporting a checkpoint
  with moving averages. Returns {'root' (records in root/data), 'config'
  (root/pipeline.config, the demo's as written), 'model_dir', 'as_run'
  (the model_dir's pipeline.config), 'initial' (model.ckpt-0) and
  'checkpoint' (model.ckpt-1)}.
  """
  root = built_once(tmp_path_factory, 'averaged_tiny_ssd',
                    _train_averaged_ssd)
  model_dir = str(root / 'model')
  return {'root': root, 'config': str(root / 'pipeline.config'),
          'model_dir': model_dir,
          'as_run': os.path.join(model_dir, 'pipeline.config'),
          'initial': os.path.join(model_dir, 'model.ckpt-0'),
          'checkpoint': os.path.join(model_dir, 'model.ckpt-1')}


def _train_one_step_fake_faster_rcnn(root):
  config = tiny_faster_rcnn.write_config(root, root / 'data', extractor='fake',
                                         batch_size=4)
  with fakes.fake_faster_rcnn_extractor():
    parts = model_lib.create_estimator_and_inputs(
        tiny_ssd.run_config(root / 'model'), pipeline_config_path=config,
        save_final_config=True)
    parts['estimator'].train(parts['train_input_fn'], max_steps=1)


@pytest.fixture(scope='session')
def one_step_fake_faster_rcnn(tmp_path_factory):
  """The tiniest model trained one step in-process, once per run:
  tiny_faster_rcnn's config with the fake 1x1-conv extractor
  (tests/fakes.py; a test registers it with fakes.fake_faster_rcnn_extractor),
  batch 4.

  For tests of what a command does around the model (relaunches onto a
  trained model_dir, evaluations, signals, bad data). Not registered in
  conftest.py: a module imports it. Returns (root, config path,
  model_dir): 4 training and 4 validation records in root/data, the as-run
  config in model_dir/pipeline.config.
  """
  root = built_once(tmp_path_factory, 'one_step_fake_faster_rcnn',
                    _train_one_step_fake_faster_rcnn)
  return root, str(root / 'pipeline.config'), str(root / 'model')


@pytest.fixture(scope='session')
def one_step_fake_faster_rcnn_export(tmp_path_factory,
                                     one_step_fake_faster_rcnn):
  """one_step_fake_faster_rcnn exported for image_tensor input, once per
  run (the SavedModel runs without the fake extractor registered).

  Not registered in conftest.py: a module imports it. Returns the export
  folder's path (a str).
  """
  return _exported_once(tmp_path_factory, 'one_step_fake_faster_rcnn_export',
                        one_step_fake_faster_rcnn[2],
                        fakes.fake_faster_rcnn_extractor)
