"""model_tpu_main end to end: the TPUEstimator path on CPU (--use_tpu=false).

On the tiniest model (tiny_faster_rcnn's config with the fake 1x1-conv
extractor, registered in this process): the command's flags and files do
not depend on the network.
"""
import os

import pytest

from od_estimator.config import config_util
from tests import event_tags
from tests import tiny_faster_rcnn
from tests.command_modules import run_command

TRAIN_STEPS = 2
# An override the as-run config shows (not batch_size, which
# --train_batch_size sets: an hparams batch_size would win over it).
OVERRIDES = 'model.faster_rcnn.second_stage_batch_size=6'


pytestmark = pytest.mark.usefixtures('fake_extractor')


def _run(args):
  return run_command('model_tpu_main', args)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """Trains TRAIN_STEPS steps of batch 2; returns (model_dir, config)."""
  root = tmp_path_factory.mktemp('model_tpu_main')
  config = tiny_faster_rcnn.write_config(root, root / 'data',
                                         extractor='fake')
  model_dir = str(root / 'model')
  result = _run(['--use_tpu=false', '--mode=train',
                 '--pipeline_config_path=%s' % config,
                 '--model_dir=%s' % model_dir,
                 '--num_train_steps=%d' % TRAIN_STEPS,
                 '--train_batch_size=2', '--num_shards=1',
                 '--hparams_overrides=%s' % OVERRIDES])
  assert result.returncode == 0, result.stderr[-3000:]
  return model_dir, config


def test_train_writes_checkpoint_and_as_run_config(trained):
  model_dir, _ = trained
  assert os.path.exists(
      os.path.join(model_dir, 'model.ckpt-%d.index' % TRAIN_STEPS))
  as_run = config_util.get_configs_from_pipeline_file(
      os.path.join(model_dir, 'pipeline.config'))
  # --train_batch_size became train_config.batch_size (the config has 1).
  assert as_run['train_config'].batch_size == 2
  assert as_run['train_config'].num_steps == TRAIN_STEPS
  assert as_run['model'].faster_rcnn.second_stage_batch_size == 6
  assert 'Loss/total_loss' in event_tags.scalar_tags(model_dir)


def test_eval_evaluates_the_final_checkpoint_and_stops(trained):
  model_dir, config = trained
  # train_steps equal to the trained steps: continuous eval returns after
  # the final checkpoint; the timeout only guards against a hang.
  result = _run(['--use_tpu=false', '--mode=eval',
                 '--pipeline_config_path=%s' % config,
                 '--model_dir=%s' % model_dir,
                 '--num_train_steps=%d' % TRAIN_STEPS,
                 '--sample_1_of_n_eval_examples=8', '--eval_timeout_secs=60',
                 '--hparams_overrides=%s' % OVERRIDES])
  assert result.returncode == 0, result.stderr[-3000:]
  tags = event_tags.scalar_tags(
      os.path.join(model_dir, 'eval_validation_data'))
  for tag in ('DetectionBoxes_Precision/mAP', 'DetectionBoxes_Recall/AR@100',
              'Loss/total_loss'):
    assert tag in tags, (tag, sorted(tags))


def test_help_lists_the_original_flags():
  result = _run(['--help'])
  # Status 0 like every other command here (absl's own --help exits 1).
  assert result.returncode == 0, result.stderr[-3000:]
  for flag in ('use_tpu', 'gcp_project', 'tpu_zone', 'tpu_name', 'num_shards',
               'iterations_per_loop', 'mode', 'train_batch_size',
               'hparams_overrides', 'num_train_steps', 'eval_training_data',
               'sample_1_of_n_eval_examples',
               'sample_1_of_n_eval_on_train_examples', 'model_dir',
               'pipeline_config_path', 'max_eval_retries',
               'save_checkpoints_steps'):
    assert '--%s:' % flag in result.stdout or '--[no]%s:' % flag in (
        result.stdout), flag


def test_missing_config_is_a_one_line_error(tmp_path):
  result = _run(['--use_tpu=false', '--mode=train',
                 '--pipeline_config_path=%s' % (tmp_path / 'missing.config'),
                 '--model_dir=%s' % (tmp_path / 'model')])
  assert result.returncode == 1
  assert 'Traceback' not in result.stderr
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith('error: ') and 'missing.config' in last
