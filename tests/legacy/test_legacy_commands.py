"""legacy.train and legacy.eval end to end, with the original's command lines.

The tiniest model (tiny_faster_rcnn's config with the fake 1x1-conv
extractor: the commands do not depend on the network) trains 2 steps with
`legacy.train --train_dir --pipeline_config_path` in a subprocess
(tests/fake_extractor_command.py), synchronously
(train_config.sync_replicas, 2 gradients of 2 images aggregated per step, as
the original's SyncReplicasOptimizer on one task); `legacy.eval
--run_once` then evaluates it in this process with the legacy evaluator's
defaults (PASCAL metrics) and its eval_config fields: num_examples, the
exported visualizations and the exported detections.
"""
import glob
import json
import os
import re
import subprocess

from absl import flags
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.config import config_util
from tests import event_tags
from tests import plain_command
from tests import tiny_faster_rcnn
from tests import tiny_ssd
from tests.command_modules import import_command

legacy_train = import_command('legacy.train')
legacy_eval = import_command('legacy.eval')

NUM_STEPS = 2
REPLICAS_TO_AGGREGATE = 2
NUM_EXAMPLES = 4


pytestmark = pytest.mark.usefixtures('fake_extractor')


def write_legacy_config(root, **train_fields):
  """The tiniest model's pipeline.config as a legacy user writes it.

  No metrics_set (the legacy default applies), num_steps in the file, and
  the legacy evaluator's fields set.
  """
  path = tiny_faster_rcnn.write_config(root, root / 'data', extractor='fake',
                                       batch_size=2)
  configs = config_util.get_configs_from_pipeline_file(path)
  train_config = configs['train_config']
  train_config.num_steps = NUM_STEPS
  for name, value in train_fields.items():
    setattr(train_config, name, value)
  eval_config = configs['eval_config']
  eval_config.ClearField('metrics_set')
  eval_config.num_examples = NUM_EXAMPLES
  eval_config.num_visualizations = 2
  eval_config.visualization_export_dir = str(root / 'images')
  eval_config.export_path = str(root / 'detections.json')
  return config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), str(root))


def run_in_process(module, argv):
  """Runs a command's main with these flags, as `python -m` would."""
  flags.FLAGS.unparse_flags()
  flags.FLAGS(['legacy'] + argv)
  try:
    return module.main([])
  finally:
    flags.FLAGS.unparse_flags()


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """Trains in a process of its own, as the user's command line does.

  The chief's sync_replicas queue runner is left waiting for gradients when
  training ends (as in the original): only the process's exit stops it.
  """
  root = tmp_path_factory.mktemp('legacy')
  config = write_legacy_config(
      root, sync_replicas=True, replicas_to_aggregate=REPLICAS_TO_AGGREGATE)
  train_dir = str(root / 'train')
  result = subprocess.run(
      plain_command.command('tests.fake_extractor_command') + [
          'od_estimator.legacy.train', '--logtostderr',
          '--train_dir=%s' % train_dir,
          '--pipeline_config_path=%s' % config],
      capture_output=True, text=True, timeout=600, cwd=tiny_ssd.REPO,
      check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return root, config, train_dir, result.stderr


def test_train_logs_each_step_and_aggregates_gradients(trained):
  _, _, train_dir, log = trained
  steps = [int(step) for step in re.findall(
      r'global step (\d+): loss = \d+\.\d{4} \(\d+\.\d{3} sec/step\)', log)]
  # One line per run of the training step; the global step moves once per
  # REPLICAS_TO_AGGREGATE gradients (the aggregation runs in a queue
  # runner, so a line may show it a step late).
  assert steps == sorted(steps) and steps[-1] == NUM_STEPS, log[-3000:]
  assert len(steps) >= REPLICAS_TO_AGGREGATE * NUM_STEPS, steps
  assert tf.train.latest_checkpoint(train_dir).endswith(
      'model.ckpt-%d' % NUM_STEPS)
  with open(os.path.join(train_dir, 'graph.pbtxt')) as f:
    assert 'sync_replicas' in f.read()
  # As the original, the config is copied into --train_dir; sync_replicas
  # is honoured here, so no note says otherwise.
  assert os.path.exists(os.path.join(train_dir, 'pipeline.config'))
  assert 'sync_replicas has no effect' not in log
  assert 'Loss/total_loss' in event_tags.scalar_tags(train_dir)
  # The chief's queue runner, waiting for gradients that never come, does
  # not hold the end of training for the stop grace period (120 s).
  assert 'threads still running' not in log


def test_eval_run_once_writes_pascal_metrics_images_and_detections(trained):
  root, config, train_dir, _ = trained
  eval_dir = str(root / 'eval')
  run_in_process(legacy_eval, [
      '--checkpoint_dir=%s' % train_dir, '--eval_dir=%s' % eval_dir,
      '--pipeline_config_path=%s' % config, '--run_once'])
  tags = event_tags.scalar_tags(eval_dir)
  assert 'PascalBoxes_Precision/mAP@0.5IOU' in tags, sorted(tags)
  assert 'Loss/total_loss' in tags
  assert not any(tag.startswith('DetectionBoxes_') for tag in tags)
  assert os.path.exists(os.path.join(eval_dir, 'pipeline.config'))
  assert sorted(os.listdir(root / 'images')) == [
      'export-image-0.png', 'export-image-1.png']
  with open(root / 'detections.json') as f:
    detections = json.load(f)
  # num_examples images, each with the model's detections.
  assert len({d['image_id'] for d in detections}) == NUM_EXAMPLES
  assert all(len(d['bbox']) == 4 and d['category_id'] in (1, 2, 3)
             for d in detections)


def test_clones_with_sync_replicas_are_refused(tmp_path):
  config = write_legacy_config(tmp_path, sync_replicas=True)
  with pytest.raises(errors.UserInputError,
                     match='In Synchronous SGD mode num_clones must be 1. '
                     'Found num_clones: 2'):
    run_in_process(legacy_train, [
        '--train_dir=%s' % (tmp_path / 'train'),
        '--pipeline_config_path=%s' % config, '--num_clones=2',
        '--clone_on_cpu'])
  assert not glob.glob(str(tmp_path / 'train' / '*'))
