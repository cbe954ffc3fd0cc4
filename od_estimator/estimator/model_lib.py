"""The Estimator / TPUEstimator and train_and_evaluate plumbing.

`create_estimator_and_inputs` builds the run configs, the input_fns, the
model_fn (estimator/model_fn.py) and the Estimator or TPUEstimator;
`create_train_and_eval_specs` and `continuous_eval` run them. The original's
model_lib names (`create_model_fn`, `unstack_batch`, `provide_groundtruth`,
`MODEL_BUILD_UTIL_MAP`, ...) are all here for code written against it.
"""
import functools
import os

from absl import logging
import tensorflow as tf
from tensorflow_estimator.python.estimator import estimator as estimator_lib
from tensorflow_estimator.python.estimator.tpu import tpu_estimator

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.estimator import cpu_bfloat16
from od_estimator.estimator import fine_tune
from od_estimator.estimator import model_fn as model_fn_lib
from od_estimator.estimator import object_based_evaluation
from od_estimator.estimator import object_based_resume
from od_estimator.estimator import resume_check
from od_estimator.estimator import training_graph
from od_estimator.input_pipeline import inputs
from od_estimator.utils import checkpoint_contents
from od_estimator.utils import checkpoint_health

NON_FINITE_LOSS = training_graph.NON_FINITE_LOSS
# The original's model_lib names, kept for code written against it.
fine_tune_checkpoint_type = fine_tune.fine_tune_checkpoint_type
create_model_fn = model_fn_lib.create_model_fn
unstack_batch = model_fn_lib.unstack_batch
provide_groundtruth = model_fn_lib.provide_groundtruth
output_dict_for_export = model_fn_lib.output_dict_for_export

# Estimator inputs/exports keep the original's names (see COMPAT.md).
MODEL_BUILD_UTIL_MAP = {
    'create_train_input_fn': inputs.create_train_input_fn,
    'create_eval_input_fn': inputs.create_eval_input_fn,
    'create_predict_input_fn': inputs.create_predict_input_fn,
}


# ---------------------------------------------------------------------------
# Estimator, inputs and specs.

def _without_fine_tune_checkpoint(configs):
  """configs whose train_config has no fine_tune_checkpoint (a copy)."""
  train_config = configs['train_config'].__class__()
  train_config.CopyFrom(configs['train_config'])
  train_config.ClearField('fine_tune_checkpoint')
  return dict(configs, train_config=train_config)


def mirrored_run_config_kwargs(num_devices, device_type='GPU'):
  """RunConfig keyword arguments for MirroredStrategy training on this machine.

  `tf.estimator.RunConfig(model_dir=..., **mirrored_run_config_kwargs(2))`
  trains on 2 GPUs: each replica gets 1/num_devices of
  train_config.batch_size, and gradients are averaged across replicas.
  Evaluation stays on one device.

  Args:
    num_devices: number of replicas.
    device_type: 'GPU'; or 'CPU' to split the CPU into `num_devices`
      session devices, which runs the same distributed graph on a machine
      without GPUs (for tests and debugging; no faster).

  Returns:
    {'train_distribute': MirroredStrategy} (plus, for CPU, a session_config
    creating the CPU devices).

  Raises:
    ValueError: for a device type other than GPU or CPU, or when this
      machine has fewer GPUs than asked for.
  """
  if device_type not in ('GPU', 'CPU'):
    raise ValueError('device_type must be GPU or CPU, got %r' % device_type)
  if num_devices < 1:
    raise errors.UserInputError(
        '--num_gpus must be positive, got %d' % num_devices)
  kwargs = {}
  if device_type == 'GPU':
    found = len(tf.config.list_physical_devices('GPU'))
    if found < num_devices:
      raise errors.UserInputError(
          '--num_gpus=%d asks for %d GPUs but TensorFlow sees %d (a CPU-only '
          'TensorFlow, or CUDA_VISIBLE_DEVICES hides them).' %
          (num_devices, num_devices, found))
  else:
    # Graph-mode sessions ignore tf.config's logical devices: the session
    # itself must create the CPU devices the replicas are placed on.
    kwargs['session_config'] = tf.compat.v1.ConfigProto(
        allow_soft_placement=True, device_count={'CPU': num_devices})
  # Built in graph mode, like the Estimator graphs it serves: built eagerly
  # it would choose eager collectives and make a variable on each device.
  with tf.Graph().as_default():
    kwargs['train_distribute'] = tf.compat.v1.distribute.MirroredStrategy(
        devices=['/%s:%d' % (device_type.lower(), index)
                 for index in range(num_devices)])
  return kwargs


def _train_config_for_device(train_config, use_tpu, bfloat16):
  """train_config as the graph is built: use_bfloat16 (or --bfloat16) on
  TPU only.

  On TPU model_fn runs the model in its bfloat16 scope; elsewhere the graph
  is built in float32 whatever the config says (bfloat16 there is a session
  rewrite, estimator/cpu_bfloat16.py), and so are the input pipeline and
  model_fn built from the returned config. The given config is unchanged.
  """
  if not use_tpu:
    return _float32_train_config(train_config)
  if not bfloat16 or train_config.use_bfloat16:
    return train_config
  bfloat16_config = train_config.__class__()
  bfloat16_config.CopyFrom(train_config)
  bfloat16_config.use_bfloat16 = True
  return bfloat16_config


def _float32_train_config(train_config):
  """train_config with use_bfloat16 off (a copy when it was on)."""
  if not train_config.use_bfloat16:
    return train_config
  float32_config = train_config.__class__()
  float32_config.CopyFrom(train_config)
  float32_config.use_bfloat16 = False
  return float32_config


def create_estimator_and_inputs(
    run_config, hparams=None, pipeline_config_path=None, config_override=None,
    train_steps=None, sample_1_of_n_eval_examples=1,
    sample_1_of_n_eval_on_train_examples=1, model_fn_creator=create_model_fn,
    use_tpu_estimator=False, use_tpu=False, num_shards=1, params=None,
    override_eval_num_epochs=True, save_final_config=False,
    postprocess_on_cpu=False, export_to_tpu=None, check_configs=None,
    resume_from_last_good=False, evaluated_checkpoint=None,
    checkpoint_dir=None, bfloat16=False, eval_plots=False, **kwargs):
  """Builds the Estimator and its input functions from a pipeline config.

  Args:
    run_config: tf.estimator.RunConfig (tpu_config.RunConfig for TPU).
    hparams, pipeline_config_path, config_override, train_steps,
      sample_1_of_n_eval_examples, override_eval_num_epochs, check_configs,
      **kwargs: the configs, their overrides and check (see _run_configs).
    sample_1_of_n_eval_on_train_examples: sampling of the eval-on-train set.
    model_fn_creator: create_model_fn or a replacement; postprocess_on_cpu
      and eval_plots (--eval_plots; passed on only when true) go to it.
    use_tpu_estimator, use_tpu, num_shards, params, export_to_tpu: the
      Estimator (see _build_estimator).
    save_final_config: the job trains into model_dir: check the checkpoint
      it resumes from (checkpoint_health; with resume_from_last_good a
      damaged one gives way to the newest intact one), and write the as-run
      pipeline.config there once the training graph is built and fits it
      (resume_check): a refused launch leaves model_dir as it was.
    resume_from_last_good, bfloat16 (--bfloat16, whatever
      train_config.use_bfloat16 says): see above and _for_device.
    evaluated_checkpoint: evaluation only: the checkpoint of --checkpoint_dir
      evaluated first, which the evaluation graph is checked against.
    checkpoint_dir: evaluation only: --checkpoint_dir (TF2 ckpt-N too).

  Returns:
    A dict with estimator, train_input_fn, eval_input_fns, eval_input_names,
    eval_on_train_input_fn, predict_input_fn, train_steps and configs.
  """
  configs = _run_configs(pipeline_config_path, config_override, hparams,
                         train_steps, sample_1_of_n_eval_examples,
                         override_eval_num_epochs, check_configs, kwargs)
  saves = run_config.is_chief and save_final_config
  checkpoint = (saves or None) and checkpoint_health.resume_point(
      run_config.model_dir, '--model_dir', resume_from_last_good)
  train_config, run_config = _for_device(configs, run_config, use_tpu,
                                         bfloat16)
  input_fns = _input_fns(configs, train_config,
                         sample_1_of_n_eval_on_train_examples,
                         override_eval_num_epochs)
  model_fn = model_fn_creator(
      functools.partial(model_builder.build, model_config=configs['model']),
      dict(configs, train_config=train_config), hparams, use_tpu,
      postprocess_on_cpu, **({'eval_plots': True} if eval_plots else {}))
  model_fn = _checked_model_fn(model_fn, run_config, checkpoint,
                               evaluated_checkpoint, configs if saves else None)
  model_fn = _evaluating_model_fn(model_fn, checkpoint_dir, configs,
                                  pipeline_config_path)
  estimator = _build_estimator(model_fn, run_config, train_config,
                               use_tpu_estimator, use_tpu, num_shards,
                               params, export_to_tpu)
  return dict(estimator=estimator, **input_fns,
              train_steps=train_config.num_steps or None, configs=configs)


def _for_device(configs, run_config, use_tpu, bfloat16):
  """(train_config, run_config) as trained on this device: bfloat16 is the
  TPU's scope on TPU, estimator/cpu_bfloat16's rewrite elsewhere."""
  train_config = _train_config_for_device(configs['train_config'], use_tpu,
                                          bfloat16)
  return train_config, cpu_bfloat16.run_config(
      run_config, bfloat16 or configs['train_config'].use_bfloat16, use_tpu)


def _run_configs(pipeline_config_path, config_override, hparams, train_steps,
                 sample_1_of_n_eval_examples, override_eval_num_epochs,
                 check_configs, kwargs):
  """The configs of a pipeline.config file with every override applied.

  Args:
    pipeline_config_path: the pipeline.config file.
    config_override: text-format TrainEvalPipelineConfig merged on top.
    hparams: optional overrides: an object with .values(), or a dict.
    train_steps: overrides train_config.num_steps when given.
    sample_1_of_n_eval_examples: evaluation sampling.
    override_eval_num_epochs: evaluate one epoch of each eval input.
    check_configs: optional fn(configs) run on the result, before anything
      is built or written to model_dir; it raises to stop the launch (see
      launch_check.check).
    kwargs: further generic config overrides {key: value}.
  """
  configs = config_util.get_configs_from_pipeline_file(pipeline_config_path,
                                                       config_override)
  overrides = dict(kwargs)
  overrides['sample_1_of_n_eval_examples'] = sample_1_of_n_eval_examples
  if train_steps:
    overrides['train_steps'] = train_steps
  if override_eval_num_epochs:
    overrides['eval_num_epochs'] = 1
  configs = config_util.merge_external_params_with_configs(
      configs, hparams, kwargs_dict=overrides)
  if check_configs is not None:
    # With load_pretrained=false the fine_tune_checkpoint is never read.
    check_configs(configs if model_fn_lib.load_pretrained(hparams) else
                  _without_fine_tune_checkpoint(configs))
  return configs


def _input_fns(configs, train_config, sample_1_of_n_eval_on_train_examples,
               override_eval_num_epochs):
  """{train_input_fn, eval_input_fns, eval_input_names,
  eval_on_train_input_fn, predict_input_fn} of create_estimator_and_inputs.
  """
  model_config = configs['model']
  train_input_config = configs['train_input_config']
  eval_config = configs['eval_config']
  eval_input_configs = configs['eval_input_configs']
  eval_on_train_input_config = train_input_config.__class__()
  eval_on_train_input_config.CopyFrom(train_input_config)
  eval_on_train_input_config.sample_1_of_n_examples = (
      sample_1_of_n_eval_on_train_examples)
  if override_eval_num_epochs:
    eval_on_train_input_config.num_epochs = 1
  create_eval_input_fn = MODEL_BUILD_UTIL_MAP['create_eval_input_fn']
  return {
      'train_input_fn': MODEL_BUILD_UTIL_MAP['create_train_input_fn'](
          train_config, train_input_config, model_config),
      'eval_input_fns': [
          create_eval_input_fn(eval_config, config, model_config)
          for config in eval_input_configs],
      'eval_input_names': [config.name or 'eval_%d' % i
                           for i, config in enumerate(eval_input_configs)],
      'eval_on_train_input_fn': create_eval_input_fn(
          eval_config, eval_on_train_input_config, model_config),
      'predict_input_fn': MODEL_BUILD_UTIL_MAP['create_predict_input_fn'](
          model_config, eval_input_configs[0] if eval_input_configs else
          train_input_config),
  }


def _checked_model_fn(model_fn, run_config, checkpoint, evaluated_checkpoint,
                      saved_configs):
  """model_fn, checked against the checkpoint it resumes from or evaluates.

  Args:
    model_fn: the model_fn.
    run_config: the RunConfig (its model_dir).
    checkpoint: the checkpoint training resumes from, or None.
    evaluated_checkpoint: see create_estimator_and_inputs.
    saved_configs: when training into model_dir, the configs written there
      as its pipeline.config once the graph is built (and fits
      `checkpoint`); else None.
  """
  if saved_configs is not None:
    def save():
      config_util.save_pipeline_config(
          config_util.create_pipeline_proto_from_configs(saved_configs),
          run_config.model_dir)
    if checkpoint and checkpoint_contents.is_object_based(checkpoint):
      # The original TF2 trainer's ckpt-N.
      return object_based_resume.resuming_model_fn(
          model_fn, run_config.model_dir, checkpoint, save)
    return resume_check.checked_model_fn(model_fn, run_config.model_dir,
                                         checkpoint, save)
  if evaluated_checkpoint and not checkpoint_contents.is_object_based(
      evaluated_checkpoint):
    # (A TF2 ckpt-N is checked as its evaluation graph is built.)
    return resume_check.checked_model_fn(
        model_fn, os.path.dirname(evaluated_checkpoint),
        evaluated_checkpoint, lambda: None, evaluating=True)
  return model_fn


def _evaluating_model_fn(model_fn, checkpoint_dir, configs,
                         pipeline_config_path):
  """model_fn; evaluating --checkpoint_dir, one that may also read the
  original's TF2 ckpt-N there (object_based_evaluation)."""
  if not checkpoint_dir:
    return model_fn
  return object_based_evaluation.evaluating_model_fn(
      model_fn, checkpoint_dir, configs['eval_config'].use_moving_averages,
      pipeline_config_path)


def _build_estimator(model_fn, run_config, train_config, use_tpu_estimator,
                     use_tpu, num_shards, params, export_to_tpu):
  """The Estimator, or the TPUEstimator with use_tpu_estimator.

  Args:
    model_fn: the model_fn.
    run_config: tf.estimator.RunConfig (tpu_config.RunConfig for TPU).
    train_config: the train_config as trained (its batch_size).
    use_tpu_estimator: build a TPUEstimator (also usable off TPU).
    use_tpu: run on TPU.
    num_shards: TPU cores.
    params: extra Estimator params.
    export_to_tpu: export a TPU SavedModel (TPUEstimator only).
  """
  if use_tpu_estimator:
    return tpu_estimator.TPUEstimator(
        model_fn=model_fn, train_batch_size=train_config.batch_size,
        eval_batch_size=num_shards * 1 if use_tpu else 1,
        use_tpu=use_tpu, config=run_config,
        export_to_tpu=bool(export_to_tpu),
        eval_on_tpu=False, params=params or {})
  return estimator_lib.Estimator(model_fn=model_fn, config=run_config,
                                 params=params)


def create_train_and_eval_specs(train_input_fn, eval_input_fns,
                                eval_on_train_input_fn, predict_input_fn,
                                train_steps, eval_on_train_data=False,
                                final_exporter_name='Servo',
                                eval_spec_names=None, hooks=None,
                                throttle_secs=0, saving_listeners=None,
                                eval_hooks=None, exporters=()):
  """Returns (TrainSpec, [EvalSpec, ...]) for train_and_evaluate.

  The first EvalSpec carries a FinalExporter (`final_exporter_name`) that
  exports a SavedModel fed serialized tf.Examples. `throttle_secs` is the
  least time between two evaluations: 0 evaluates every checkpoint of a
  local run, but makes a cluster's evaluator task poll without pause.
  `saving_listeners` run after each checkpoint is written, before the
  evaluation train_and_evaluate makes of it; `eval_hooks` run in the
  evaluations of the first EvalSpec, and `exporters` (more
  tf.estimator.Exporters, e.g. keep_best.BestExporter) see its results.
  """
  train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn,
                                      max_steps=train_steps, hooks=hooks,
                                      saving_listeners=saving_listeners)
  eval_spec_names = eval_spec_names or [str(i) for i in
                                        range(len(eval_input_fns))]
  eval_specs = []
  for index, (name, input_fn) in enumerate(zip(eval_spec_names,
                                               eval_input_fns)):
    spec_exporters = ([tf.estimator.FinalExporter(
        name=final_exporter_name,
        serving_input_receiver_fn=predict_input_fn)] + list(exporters)
                      if index == 0 else None)
    eval_specs.append(tf.estimator.EvalSpec(
        name=name, input_fn=input_fn, steps=None, exporters=spec_exporters,
        throttle_secs=throttle_secs, start_delay_secs=0,
        hooks=eval_hooks if index == 0 else None))
  if eval_on_train_data:
    eval_specs.append(tf.estimator.EvalSpec(
        name='eval_on_train', input_fn=eval_on_train_input_fn, steps=None,
        throttle_secs=throttle_secs, start_delay_secs=0))
  return train_spec, eval_specs


def continuous_eval(estimator, model_dir, input_fn, train_steps, name,
                    max_retries=0, timeout_secs=None, hooks=None,
                    skip_damaged=False, on_evaluated=None):
  """Evaluates each new checkpoint until one at train_steps is evaluated.

  Args:
    estimator: the Estimator.
    model_dir: where checkpoints appear.
    input_fn: eval input_fn.
    train_steps: stop after evaluating a checkpoint at or past this step.
    name: eval name (events go to model_dir/eval_<name>).
    max_retries: evaluations to retry after an error before giving up.
    timeout_secs: give up when no new checkpoint arrives for this long
      (default: wait forever, as the original).
    hooks: SessionRunHooks of each evaluation.
    skip_damaged: a damaged checkpoint (checkpoint_health.problem) is
      skipped with a warning, for the newest intact one when not evaluated
      yet; otherwise it raises errors.UserInputError naming it.
    on_evaluated: fn(metrics, checkpoint) called after each evaluation
      (e.g. keep_best.BestKeeper.update).

  Returns:
    The metrics of the last evaluation, or None when none was made.
  """
  retries = 0
  metrics = None
  evaluated = set()
  for checkpoint in tf.train.checkpoints_iterator(
      model_dir, min_interval_secs=0, timeout=timeout_secs):
    checkpoint = _intact_or_raise(checkpoint, model_dir, skip_damaged)
    if checkpoint is None or checkpoint in evaluated:
      continue
    logging.info('Evaluating %s', checkpoint)
    try:
      metrics = estimator.evaluate(input_fn=input_fn, steps=None,
                                   checkpoint_path=checkpoint, name=name,
                                   hooks=hooks)
    except tf.errors.NotFoundError:
      logging.info('Checkpoint %s disappeared before it could be evaluated.',
                   checkpoint)
      continue
    except tf.errors.InvalidArgumentError:
      retries += 1
      if retries > max_retries:
        raise
      logging.warning('Evaluation failed; retry %d of %d.', retries,
                      max_retries)
      continue
    evaluated.add(checkpoint)
    if on_evaluated:
      on_evaluated(metrics, checkpoint)
    # The checkpoint's own step: a TF2 ckpt-N numbers the saves.
    step = int(metrics[tf.compat.v1.GraphKeys.GLOBAL_STEP])
    if train_steps and step >= train_steps:
      logging.info('Evaluated the final checkpoint (step %d).', step)
      return metrics
  _log_eval_timeout(model_dir, timeout_secs, metrics, train_steps)
  return metrics


def _intact_or_raise(checkpoint, model_dir, skip_damaged):
  """`checkpoint` when intact; else the newest intact one (skip_damaged)
  or errors.UserInputError. None when it disappeared (rotated away)."""
  wrong = checkpoint_health.problem(checkpoint)
  if wrong is None:
    return checkpoint
  if not tf.io.gfile.exists(checkpoint + '.index'):
    logging.info('Checkpoint %s disappeared before it could be evaluated.',
                 checkpoint)
    return None
  if not skip_damaged:
    raise errors.UserInputError(
        'cannot evaluate checkpoint %s: %s. --resume_from_last_good skips '
        'damaged checkpoints.' % (checkpoint, wrong))
  good = checkpoint_health.last_intact(model_dir, skip=(checkpoint,))
  logging.warning('Skipping the damaged checkpoint %s (%s)%s.', checkpoint,
                  wrong, '; evaluating %s' % good if good else '')
  return good


def _log_eval_timeout(model_dir, timeout_secs, metrics, train_steps):
  """Says why continuous evaluation stopped before the final checkpoint."""
  if metrics is None:
    logging.warning(
        'Stopping evaluation: no checkpoint appeared in %s within %s s, so '
        'nothing was evaluated; check that it is the training model_dir.',
        model_dir, timeout_secs)
  else:
    logging.warning(
        'Stopping evaluation: no new checkpoint in %s for %s s after step '
        '%s; the final step (%s) was not reached.', model_dir, timeout_secs,
        metrics.get('global_step'), train_steps or 'not set')
