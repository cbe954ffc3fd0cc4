r"""Evaluates a detector with the original's legacy eval.py command line.

One pipeline config (--eval_training_data evaluates the training input):

  python -m od_estimator.legacy.eval --logtostderr \
      --checkpoint_dir=path/to/train_dir --eval_dir=path/to/eval_dir \
      --pipeline_config_path=pipeline.config

Or three files, one per part:

  python -m od_estimator.legacy.eval --logtostderr \
      --checkpoint_dir=path/to/train_dir --eval_dir=path/to/eval_dir \
      --eval_config_path=eval.config --model_config_path=model.config \
      --input_config_path=eval_input.config

As the original: the latest checkpoint is evaluated every
eval_config.eval_interval_secs, max_evals times (0: forever; --run_once:
once), on eval_config.num_examples images; metrics_set defaults to
pascal_voc_detection_metrics (the deprecated open_images_V2_detection_metrics
is accepted). Metrics and the first num_visualizations images (detections
left, groundtruth right) are written as summaries into --eval_dir, the
images also as PNG files into visualization_export_dir when set; export_path
receives the detections as COCO results JSON; ignore_groundtruth (which
needs export_path) only exports, once. The model_fn and input_fn are those
of model_main.
"""
import functools
import tempfile

from absl import flags
from absl import logging
import tensorflow as tf

from od_estimator import command_line
from od_estimator import errors
from od_estimator.checks import launch_check
from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.legacy import configs as legacy_configs
from od_estimator.legacy import evaluation

flags.DEFINE_boolean('eval_training_data', False,
                     'If training data should be evaluated for this job.')
flags.DEFINE_string('checkpoint_dir', '',
                    'Directory containing checkpoints to evaluate, typically '
                    'set to `train_dir` used in the training job.')
flags.DEFINE_string('eval_dir', '', 'Directory to write eval summaries to.')
flags.DEFINE_string('pipeline_config_path', '',
                    'Path to a pipeline_pb2.TrainEvalPipelineConfig config '
                    'file. If provided, other configs are ignored')
flags.DEFINE_string('eval_config_path', '',
                    'Path to an eval_pb2.EvalConfig config file.')
flags.DEFINE_string('input_config_path', '',
                    'Path to an input_reader_pb2.InputReader config file.')
flags.DEFINE_string('model_config_path', '',
                    'Path to a model_pb2.DetectionModel config file.')
flags.DEFINE_boolean('run_once', False, 'Option to only run a single pass of '
                     'evaluation. Overrides the `max_evals` parameter in the '
                     'provided config.')
FLAGS = flags.FLAGS

# The legacy evaluator's default, where model_main's is COCO.
EVAL_DEFAULT_METRIC = 'pascal_voc_detection_metrics'


def _copy(message):
  duplicate = message.__class__()
  duplicate.CopyFrom(message)
  return duplicate


def _evaluation_configs(configs):
  """configs as legacy eval runs them: its defaults, one input, one epoch."""
  if FLAGS.eval_training_data:
    input_config = _copy(configs['train_input_config'])
  elif configs['eval_input_configs']:
    input_config = _copy(configs['eval_input_configs'][0])
  else:
    raise errors.UserInputError(
        'the config has no eval_input_reader to evaluate (or add '
        '--eval_training_data)')
  input_config.num_epochs = 1
  eval_config = _copy(configs['eval_config'])
  if not eval_config.metrics_set:
    eval_config.metrics_set.append(EVAL_DEFAULT_METRIC)
  if FLAGS.run_once:
    eval_config.max_evals = 1
  if eval_config.ignore_groundtruth and not eval_config.export_path:
    raise errors.UserInputError(
        'If ignore_groundtruth=True then an export_path is required '
        '(eval_config.ignore_groundtruth without eval_config.export_path).')
  # The legacy evaluator always drew the first num_visualizations images.
  eval_config.retain_original_images = eval_config.num_visualizations > 0
  input_config.include_source_id |= bool(eval_config.export_path)
  return dict(configs, eval_config=eval_config,
              eval_input_configs=[input_config],
              eval_input_config=input_config)


def main(unused_argv):
  logging.set_verbosity(logging.INFO)
  if not FLAGS.checkpoint_dir:
    raise errors.UserInputError('`checkpoint_dir` is missing '
                                '(--checkpoint_dir).')
  if not FLAGS.eval_dir:
    raise errors.UserInputError('`eval_dir` is missing (--eval_dir).')
  configs, copies, label = legacy_configs.load(
      FLAGS.pipeline_config_path, FLAGS.model_config_path,
      FLAGS.eval_config_path, FLAGS.input_config_path, training=False)
  configs = _evaluation_configs(configs)
  launch_check.check(configs, pipeline_config_path=label,
                     evaluation_only=not FLAGS.eval_training_data,
                     command='legacy_eval')
  legacy_configs.copy_files(copies, FLAGS.eval_dir)
  eval_config = configs['eval_config']
  model_fn = model_lib.create_model_fn(
      functools.partial(model_builder.build, model_config=configs['model']),
      configs)
  input_fn = model_lib.MODEL_BUILD_UTIL_MAP['create_eval_input_fn'](
      eval_config, configs['eval_input_config'], configs['model'])
  if FLAGS.run_once and not tf.train.latest_checkpoint(FLAGS.checkpoint_dir):
    raise errors.UserInputError('no checkpoint in --checkpoint_dir=%s' %
                                FLAGS.checkpoint_dir)
  # The Estimator's own evaluation events stay out of --eval_dir, which
  # gets the original's summaries (evaluation.write_summaries).
  with tempfile.TemporaryDirectory() as estimator_dir:
    estimator = tf.estimator.Estimator(
        model_fn=evaluation.with_image_ids(model_fn),
        config=tf.estimator.RunConfig(model_dir=estimator_dir))
    evaluation.repeated_evaluation(
        functools.partial(evaluation.evaluate_once, estimator, input_fn,
                          eval_config=eval_config, eval_dir=FLAGS.eval_dir),
        FLAGS.checkpoint_dir, eval_config)
  return 0


def run():
  """Console-script entry: clear one-line errors instead of tracebacks."""
  return command_line.run_training(main, lambda: FLAGS.eval_dir, __doc__,
                                   __name__)


if __name__ == '__main__':
  run()
