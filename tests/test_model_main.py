"""model_main end to end: a real tiny SSD trains, evaluates and exports.

The train -> eval -> export run of the demo's model is the command line
in a subprocess; the bad-config error runs the command in this process
(run_command) and the evaluate-only runs call model_main.main in this
process with the flags parsed as absl does (no interpreter start), on the
session's one-step tiniest model (tests/trained_models.py's
one_step_fake_faster_rcnn): they are about the evaluation's flags and
config fields, not the network.
"""
import glob
import json
import os
import re
import subprocess

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from od_estimator.metrics import eval_plots
from od_estimator.metrics import report_drawings
from tests.command_modules import import_command
from tests.command_modules import run_command

from tests import event_tags
from tests import fakes
from tests import plain_command
from tests import tiny_ssd

model_main = import_command('model_main')

# `python -m od_estimator.model_main` with its sessions without grappler
# (tests/plain_command.py); the families' end-to-end runs
# (tests/trained_models.py) and test_xla run it with grappler.
MODEL_MAIN = plain_command.command('od_estimator.model_main')


def _run(args, timeout=600):
  result = subprocess.run(MODEL_MAIN + args, capture_output=True, text=True,
                          timeout=timeout, cwd=tiny_ssd.REPO, check=False)
  return result


def _evaluate_once(config, model_dir, checkpoint_dir, *more_flags):
  """model_main.main with --checkpoint_dir and --run_once, in-process, on
  the tiniest model (its fake extractor registered meanwhile).

  main() marks its flags required (absl validators, process-wide): they are
  taken off again for the other tests of this process.
  """
  flags = model_main.FLAGS
  validators = {name: list(flags[name].validators)
                for name in ('model_dir', 'pipeline_config_path')}
  flags(['model_main', '--pipeline_config_path=%s' % config,
         '--model_dir=%s' % model_dir, '--checkpoint_dir=%s' % checkpoint_dir,
         '--run_once', *more_flags])
  try:
    with fakes.fake_faster_rcnn_extractor():
      model_main.main(None)
  finally:
    for name, kept in validators.items():
      flags[name].validators[:] = kept
    flags.unparse_flags()


def _eval_images(directory):
  """{tag: (height, width)} of the image summaries in the events files."""
  images = {}
  for path in glob.glob(os.path.join(directory, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.HasField('image'):
          images[value.tag] = (value.image.height, value.image.width)
  return images


# The Estimator tags an eval metric holding a Summary '<metric name>/0'. The
# tiny config's 8 validation images are 64 x 64 (num_visualizations: 10).
def _eval_image_tags(count):
  return ['Detections_Left_Groundtruth_Right/%d/0' % i for i in range(count)]


EVAL_IMAGE_TAGS = _eval_image_tags(8)
# The tiniest model's config evaluates its 4 validation images.
ONE_STEP_EVAL_IMAGE_TAGS = _eval_image_tags(4)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """Trains 6 steps; returns (model_dir, config, log).

  One checkpoint after step 0, so one evaluation (each builds the eval
  graph again) and the export; the evaluated checkpoint is kept as the
  best (--keep_best_by; tests/estimator/test_keep_best.py for the rest).
  """
  root = tmp_path_factory.mktemp('model_main')
  config = tiny_ssd.write_config(root, root / 'data')
  model_dir = str(root / 'model')
  result = _run(['--pipeline_config_path=%s' % config,
                 '--model_dir=%s' % model_dir, '--num_train_steps=6',
                 '--save_checkpoints_steps=6', '--log_every_n_steps=2',
                 '--hparams_overrides=%s' % tiny_ssd.TINY_OVERRIDES,
                 '--keep_best_by=DetectionBoxes_Precision/mAP@.50IOU'])
  assert result.returncode == 0, result.stderr[-3000:]
  return model_dir, config, result.stderr


def test_train_and_evaluate_writes_checkpoints_config_and_summaries(trained):
  model_dir, _, log = trained
  assert os.path.exists(os.path.join(model_dir, 'model.ckpt-6.index'))
  assert os.path.exists(os.path.join(model_dir, 'pipeline.config'))
  with open(os.path.join(model_dir, 'pipeline.config')) as f:
    as_run = f.read()
  assert 'depth_multiplier: 0.25' in as_run and 'num_steps: 6' in as_run
  train_tags = event_tags.scalar_tags(model_dir)
  for tag in ('Loss/localization_loss', 'Loss/classification_loss',
              'Loss/regularization_loss', 'Loss/total_loss', 'learning_rate'):
    assert tag in train_tags, (tag, sorted(train_tags))
  eval_tags = event_tags.scalar_tags(os.path.join(model_dir, 'eval_0'))
  for tag in ('DetectionBoxes_Precision/mAP',
              'DetectionBoxes_Precision/mAP@.50IOU',
              'DetectionBoxes_Recall/AR@100', 'Loss/total_loss'):
    assert tag in eval_tags, (tag, sorted(eval_tags))
  images = _eval_images(os.path.join(model_dir, 'eval_0'))
  assert sorted(images) == EVAL_IMAGE_TAGS
  assert set(images.values()) == {(64, 128)}
  # The Servo exporter wrote a SavedModel fed serialized tf.Examples.
  assert glob.glob(os.path.join(model_dir, 'export', 'Servo', '*',
                                'saved_model.pb'))
  # Progress lines with step, loss, rate and ETA; off a terminal plain
  # lines (tests/test_quiet_output.py draws the bar): the first step's, the
  # evaluation's.
  assert 'step 4/6, loss' in log and 'ETA' in log
  assert re.search(r'step 1/6, loss [\d.]+ \(first step\)', log), log
  assert 'evaluated step 6: ' in log and '\r' not in log


def test_train_and_evaluate_keeps_the_evaluated_checkpoint(trained):
  model_dir = trained[0]
  best = os.path.join(model_dir, 'best')
  with open(os.path.join(best, 'best.json')) as f:
    record = json.load(f)
  metric = 'DetectionBoxes_Precision/mAP@.50IOU'
  assert (record['step'], record['metric'], record['checkpoint']) == (
      6, metric, 'model.ckpt-6')
  evaluated = event_tags.last_scalars(os.path.join(model_dir, 'eval_0'))
  assert record['value'] == pytest.approx(evaluated[metric], abs=1e-6)
  assert tf.train.latest_checkpoint(best) == os.path.join(best,
                                                          'model.ckpt-6')


def test_evaluate_once_from_a_checkpoint_dir(one_step_fake_faster_rcnn,
                                             tmp_path):
  _, config, model_dir = one_step_fake_faster_rcnn
  _evaluate_once(config, tmp_path / 'eval', model_dir)
  tags = event_tags.scalar_tags(
      str(tmp_path / 'eval' / 'eval_validation_data'))
  assert 'DetectionBoxes_Precision/mAP' in tags
  images = _eval_images(str(tmp_path / 'eval' / 'eval_validation_data'))
  # Without --eval_plots, no evaluation plots.
  assert sorted(images) == ONE_STEP_EVAL_IMAGE_TAGS
  assert set(images.values()) == {(64, 128)}


def test_no_eval_images_and_a_dummy_loss_when_asked(
    one_step_fake_faster_rcnn, tmp_path):
  _, config, model_dir = one_step_fake_faster_rcnn
  with open(config) as f:
    text = f.read()
  assert 'eval_config {' in text
  changed = tmp_path / 'pipeline.config'
  changed.write_text(text.replace('eval_config {', 'eval_config {\n'
                                  '  num_visualizations: 0\n'
                                  '  use_dummy_loss_in_eval: true\n'))
  _evaluate_once(changed, tmp_path / 'eval', model_dir)
  directory = str(tmp_path / 'eval' / 'eval_validation_data')
  assert not _eval_images(directory)
  tags = event_tags.scalar_tags(directory)
  assert 'DetectionBoxes_Precision/mAP' in tags
  # The model's losses were not computed: only the constant total.
  assert [tag for tag in tags if tag.startswith('Loss/')] == [
      'Loss/total_loss'], sorted(tags)
  accumulator = event_accumulator.EventAccumulator(glob.glob(os.path.join(
      directory, 'events.out.tfevents.*'))[0])
  accumulator.Reload()
  assert accumulator.Scalars('Loss/total_loss')[-1].value == 1.0


def test_bad_config_is_a_one_line_error(tmp_path):
  config = tmp_path / 'bad.config'
  config.write_text('model { ssd { num_classes: x } }')
  result = run_command('model_main', [
      '--pipeline_config_path=%s' % config,
      '--model_dir=%s' % str(tmp_path / 'model')])
  assert result.returncode == 1
  assert 'bad.config:1' in result.stderr
  assert 'Traceback' not in result.stderr


def test_metrics_printout_shows_every_scalar_of_every_family(capsys):
  scalars = {
      'DetectionBoxes_Precision/mAP': np.float32(0.25),
      'DetectionMasks_Recall/AR@100': np.float32(0.5),
      'PascalBoxes_Precision/mAP@0.5IOU': 0.125,
      'WeightedPascalBoxes_Precision/mAP@0.5IOU': np.float64(0.75),
      'PrecisionAtRecallBoxes_Precision/mAP@0.5IOU@[0.0,0.5]Recall': 1.0,
      'OpenImagesV2_PerformanceByCategory/AP@0.5IOU/cat': np.float32(0.5),
      'Loss/RPNLoss/objectness_loss': np.float32(2.0),
      'loss': np.float32(3.0),
      'learning_rate': np.float32(0.004),
  }
  metrics = dict(scalars, global_step=np.int64(7),
                 per_image=np.zeros([2, 3], np.float32), note=b'text')
  model_main._print_metrics((metrics, None))
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == 'Evaluation at step 7:'
  printed = {line.split()[0]: float(line.split()[-1]) for line in lines[1:]}
  assert printed == pytest.approx(
      {name: float(value) for name, value in scalars.items()}, abs=1e-4)
  assert [line.split()[0] for line in lines[1:]] == sorted(scalars)


@pytest.mark.parametrize('argv, seed', [(['--random_seed=7'], 7), ([], None)])
def test_random_seed_is_the_run_configs_graph_seed(tmp_path, argv, seed):
  flags = model_main.FLAGS
  flags(['model_main', '--model_dir=%s' % tmp_path] + argv)
  try:
    assert model_main._run_config().tf_random_seed == seed
  finally:
    flags.unparse_flags()


def test_eval_plots_writes_curves_confusion_matrix_and_worst_images(
    one_step_fake_faster_rcnn, tmp_path, monkeypatch):
  _, config, model_dir = one_step_fake_faster_rcnn
  # Fewer than the 4 evaluation images, which the untrained model all
  # gets wrong: the grid keeps only the 3 worst.
  monkeypatch.setattr(eval_plots, 'NUM_WORST_IMAGES', 3)
  _evaluate_once(config, tmp_path / 'eval', model_dir, '--eval_plots')
  directory = str(tmp_path / 'eval' / 'eval_validation_data')
  pictures = {}
  for path in glob.glob(os.path.join(directory, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.HasField('image') and value.tag.startswith('EvalPlots/'):
          pictures[value.tag] = (
              (value.image.height, value.image.width),
              tf.io.decode_png(value.image.encoded_image_string).shape)
  assert sorted(pictures) == ['EvalPlots/ConfusionMatrix/0',
                              'EvalPlots/PerClass/0',
                              'EvalPlots/PrecisionRecall/0',
                              'EvalPlots/WorstImages/0']
  for (height, width), shape in pictures.values():
    assert shape == (height, width, 3) and height >= 40 and width >= 200
  width, height = report_drawings.grid_size(3)
  assert pictures['EvalPlots/WorstImages/0'][1] == (height, width, 3)
  # The evaluation images are still written beside them.
  assert set(ONE_STEP_EVAL_IMAGE_TAGS) <= set(_eval_images(directory))
