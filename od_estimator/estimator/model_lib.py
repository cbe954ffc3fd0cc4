"""The model_fn factory and the Estimator / train_and_evaluate plumbing.

`create_model_fn` returns one `model_fn(features, labels, mode, params)` for
TRAIN, EVAL and PREDICT, for `tf.estimator.Estimator` and for
`TPUEstimator`. It is a sequence of calls to small functions, each
testable alone: the training half in training_graph (losses, train op),
the checkpoint initialization in fine_tune, the evaluation half in
eval_graph (eval dict, metric ops, losses) and the export half below
(`_build_export_outputs`).
"""
import functools
import os

from absl import logging
import tensorflow as tf
from tensorflow_estimator.python.estimator import estimator as estimator_lib
from tensorflow_estimator.python.estimator.tpu import tpu_estimator

from od_estimator import errors
from od_estimator.estimator import eval_graph
from od_estimator.estimator import fine_tune
from od_estimator.estimator import moving_averages
from od_estimator.input_pipeline import inputs
from od_estimator.estimator import resume_check
from od_estimator.estimator import training_graph
from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.utils import checkpoint_health
from od_estimator.config import config_util
from od_estimator.utils import graph_building

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
_ModeKeys = tf.estimator.ModeKeys
LABEL_ID_OFFSET = eval_graph.LABEL_ID_OFFSET
NON_FINITE_LOSS = training_graph.NON_FINITE_LOSS
# The original's model_lib names, kept for code written against it.
fine_tune_checkpoint_type = fine_tune.fine_tune_checkpoint_type

# Estimator inputs/exports keep the original's names (see COMPAT.md).
MODEL_BUILD_UTIL_MAP = {
    'create_train_input_fn': inputs.create_train_input_fn,
    'create_eval_input_fn': inputs.create_eval_input_fn,
    'create_predict_input_fn': inputs.create_predict_input_fn,
}


# ---------------------------------------------------------------------------
# Groundtruth.

def unstack_batch(tensor_dict, unpad_groundtruth_tensors=True):
  """Splits batched label tensors into per-image lists.

  Args:
    tensor_dict: batched labels (leading dimension B).
    unpad_groundtruth_tensors: slice each image's rows to its
      num_groundtruth_boxes (off TPU; dynamic shapes).

  Returns:
    {key: list of B tensors}.
  """
  unbatched = {key: tf.unstack(value) for key, value in tensor_dict.items()}
  if not unpad_groundtruth_tensors:
    return unbatched
  if _IN.num_groundtruth_boxes not in unbatched:
    raise ValueError('unpadding needs `num_groundtruth_boxes` in the labels')
  counts = unbatched[_IN.num_groundtruth_boxes]
  for key in inputs.PER_BOX_FIELDS:
    if key in unbatched:
      unbatched[key] = [tensor[:count] for tensor, count in
                        zip(unbatched[key], counts)]
  return unbatched


def provide_groundtruth(model, labels):
  """Passes per-image groundtruth lists from `labels` to the model."""
  def optional(key):
    return labels.get(key)
  model.provide_groundtruth(
      groundtruth_boxes_list=labels[_IN.groundtruth_boxes],
      groundtruth_classes_list=labels[_IN.groundtruth_classes],
      groundtruth_masks_list=optional(_IN.groundtruth_instance_masks),
      groundtruth_keypoints_list=optional(_IN.groundtruth_keypoints),
      groundtruth_weights_list=optional(_IN.groundtruth_weights),
      groundtruth_confidences_list=optional(_IN.groundtruth_confidences),
      groundtruth_is_crowd_list=optional(_IN.groundtruth_is_crowd))


# ---------------------------------------------------------------------------
# Export.

def _ema_scaffold():
  """Scaffold whose saver loads moving averages into the model variables."""
  return moving_averages.scaffold()


def output_dict_for_export(detections):
  """Detections with 1-based float classes, as served by exports.

  Both the Estimator's PREDICT signature and the exporter's graphs serve
  this dict: the four required outputs, then those of
  standard_fields.OPTIONAL_EXPORTED_OUTPUTS the model returns.
  """
  outputs = {
      _DET.detection_boxes: detections[_DET.detection_boxes],
      _DET.detection_scores: detections[_DET.detection_scores],
      _DET.detection_classes: tf.cast(detections[_DET.detection_classes],
                                      tf.float32) + LABEL_ID_OFFSET,
      _DET.num_detections: tf.cast(detections[_DET.num_detections],
                                   tf.float32),
  }
  for key in fields.OPTIONAL_EXPORTED_OUTPUTS:
    if key in detections:
      outputs[key] = detections[key]
  return outputs


def _build_export_outputs(detections):
  outputs = output_dict_for_export(detections)
  return outputs, {
      tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY:
          tf.estimator.export.PredictOutput(outputs)}


# ---------------------------------------------------------------------------
# model_fn.

def _called_by_tpu_estimator(params):
  """True when TPUEstimator calls model_fn (it always sets params['use_tpu']).

  TPUEstimator then gets TPUEstimatorSpecs (scaffold_fn, eval_metrics) even
  off TPU, where it turns them into EstimatorSpecs itself.
  """
  return params is not None and 'use_tpu' in params


def _hparam(hparams, name, default):
  """hparams' `name` (an attribute, or a dict key), else `default`."""
  if hparams is None:
    return default
  if isinstance(hparams, dict):
    return hparams.get(name, default)
  return getattr(hparams, name, default)


def _load_pretrained(hparams):
  """hparams' load_pretrained; default True."""
  return _hparam(hparams, 'load_pretrained', True)


def _without_fine_tune_checkpoint(configs):
  """configs whose train_config has no fine_tune_checkpoint (a copy)."""
  train_config = configs['train_config'].__class__()
  train_config.CopyFrom(configs['train_config'])
  train_config.ClearField('fine_tune_checkpoint')
  return dict(configs, train_config=train_config)


def _rewrite_graph(graph_rewriter_config, is_training):
  """Applies a graph_rewriter (quantization) to the default graph, if any."""
  if graph_rewriter_config is not None:
    graph_rewriter_builder.build(graph_rewriter_config,
                                 is_training=is_training)()


def create_model_fn(detection_model_fn, configs, hparams=None, use_tpu=False,
                    postprocess_on_cpu=False, optimizer_wrapper=None):
  """Returns model_fn(features, labels, mode, params) for (TPU)Estimator.

  Args:
    detection_model_fn: fn(is_training, add_summaries) -> DetectionModel.
    configs: a configs dict (config_util).
    hparams: optional object with boolean `load_pretrained` (default True:
      load fine_tune_checkpoint) and `allow_partial_fine_tune` (default
      False: see fine_tune) attributes, or a dict.
    use_tpu: build for a TPU (CrossShardOptimizer, bfloat16). Under
      TPUEstimator the specs are TPUEstimatorSpecs whether or not on TPU.
    postprocess_on_cpu: run post-processing outside the TPU computation.
    optimizer_wrapper: see training_graph.build_train_op.
  """
  train_config = configs['train_config']
  eval_config = configs['eval_config']
  eval_input_config = configs['eval_input_configs'][0] if configs[
      'eval_input_configs'] else configs['train_input_config']
  graph_rewriter_config = configs.get('graph_rewriter_config')
  if graph_rewriter_config is not None:
    # Bad bit widths are refused here, before any graph is built.
    graph_rewriter_builder.build(graph_rewriter_config, is_training=True)
  load_pretrained = _load_pretrained(hparams)
  allow_partial = _hparam(hparams, 'allow_partial_fine_tune', False)

  def build_spec(features, labels, mode, params):
    tpu_spec = use_tpu or _called_by_tpu_estimator(params)
    is_training = mode == _ModeKeys.TRAIN
    model = detection_model_fn(is_training=is_training,
                               add_summaries=not use_tpu)
    if mode != _ModeKeys.PREDICT:
      labels = unstack_batch(labels, unpad_groundtruth_tensors=(
          train_config.unpad_groundtruth_tensors and not use_tpu))
      provide_groundtruth(model, labels)
    images = features[_IN.image]
    if use_tpu and train_config.use_bfloat16:
      with tf.compat.v1.tpu.bfloat16_scope():
        prediction_dict = model.predict(images,
                                        features[_IN.true_image_shape])
      prediction_dict = {k: tf.cast(v, tf.float32) if
                         getattr(v, 'dtype', None) == tf.bfloat16 else v
                         for k, v in prediction_dict.items()}
    else:
      prediction_dict = model.predict(images, features[_IN.true_image_shape])

    if mode == _ModeKeys.TRAIN:
      losses, total_loss = training_graph.build_losses(
          model, prediction_dict, features[_IN.true_image_shape],
          train_config)
      if not use_tpu:
        for name, loss in losses.items():
          training_graph.scalar_summary(name, loss)
      scaffold_fn = fine_tune.build_scaffold_fn(
          model, train_config, use_tpu, load_pretrained, allow_partial)
      # As the original: after the loss, before the optimizer (so gradients
      # flow through the FakeQuant ops); fine-tune restores float weights.
      _rewrite_graph(graph_rewriter_config, is_training=True)
      # TPU training loops cannot run the Assert; TPUEstimator (also off
      # TPU) keeps only its NanTensorHook.
      train_op = training_graph.build_train_op(
          total_loss, model, train_config, use_tpu,
          check_finite_loss=not tpu_spec,
          optimizer_wrapper=optimizer_wrapper)
      if tpu_spec:
        return tpu_estimator.TPUEstimatorSpec(
            mode=mode, loss=total_loss, train_op=train_op,
            scaffold_fn=scaffold_fn)
      return tf.estimator.EstimatorSpec(mode=mode, loss=total_loss,
                                        train_op=train_op,
                                        scaffold=scaffold_fn())

    postprocess = functools.partial(model.postprocess,
                                    true_image_shapes=features[
                                        _IN.true_image_shape])
    if use_tpu and postprocess_on_cpu:
      detections = tf.compat.v1.tpu.outside_compilation(postprocess,
                                                        prediction_dict)
    else:
      detections = postprocess(prediction_dict)

    if mode == _ModeKeys.PREDICT:
      # Also for the Servo export (the original rewrote only TRAIN and
      # EVAL), so it serves the same quantized graph as the exporter.
      _rewrite_graph(graph_rewriter_config, is_training=False)
      predictions, export_outputs = _build_export_outputs(detections)
      # The weights evaluation and exporter use, so all three agree.
      averages = eval_config.use_moving_averages
      if tpu_spec:
        return tpu_estimator.TPUEstimatorSpec(
            mode=mode, predictions=predictions, export_outputs=export_outputs,
            scaffold_fn=_ema_scaffold if averages else None)
      return tf.estimator.EstimatorSpec(
          mode=mode, predictions=predictions, export_outputs=export_outputs,
          scaffold=_ema_scaffold() if averages else None)

    losses, total_loss = eval_graph.build_eval_losses(model, prediction_dict, features,
                                            configs)
    _rewrite_graph(graph_rewriter_config, is_training=False)
    eval_dict = eval_graph.build_eval_dict(labels, features, detections,
                                 eval_input_config, reframe_masks=not tpu_spec)
    if tpu_spec:
      return tpu_estimator.TPUEstimatorSpec(
          mode=mode, loss=total_loss,
          eval_metrics=eval_graph.build_tpu_eval_metrics(
              eval_dict, losses, configs,
              # As the original, no images from TPU evaluations.
              images=not use_tpu and _IN.original_image in features),
          scaffold_fn=(_ema_scaffold if eval_config.use_moving_averages
                       else None))
    scaffold = _ema_scaffold() if eval_config.use_moving_averages else None
    return tf.estimator.EstimatorSpec(
        mode=mode, loss=total_loss, scaffold=scaffold,
        eval_metric_ops=eval_graph.build_eval_metric_ops(
            eval_dict, losses, configs,
            images=_IN.original_image in features))
  # Under a distribution strategy the Estimator calls model_fn through
  # call_for_each_replica, whose AutoGraph conversion would rewrite (and
  # break on) the model's plain graph-building Python.
  unconverted = tf.autograph.experimental.do_not_convert(
      graph_building.identity_equality()(build_spec))

  def model_fn(features, labels, mode, params=None):
    return unconverted(features, labels, mode, params)
  return model_fn


# ---------------------------------------------------------------------------
# Estimator, inputs and specs.

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


def _train_config_for_device(train_config, use_tpu):
  """train_config as trained here: use_bfloat16 applies on TPU only.

  bfloat16 is a TPU number format; elsewhere the original trains in float32
  whatever the config says, and so do the input pipeline and model_fn built
  from the returned config. The given config is left unchanged.
  """
  if use_tpu or not train_config.use_bfloat16:
    return train_config
  logging.warning('train_config.use_bfloat16 is ignored off TPU: training '
                  'in float32.')
  return _float32_train_config(train_config)


def _float32_train_config(train_config):
  """train_config with use_bfloat16 off (a copy when it was on)."""
  if not train_config.use_bfloat16:
    return train_config
  float32_config = train_config.__class__()
  float32_config.CopyFrom(train_config)
  float32_config.use_bfloat16 = False
  return float32_config


def create_estimator_and_inputs(run_config, hparams=None,
                                pipeline_config_path=None,
                                config_override=None, train_steps=None,
                                sample_1_of_n_eval_examples=1,
                                sample_1_of_n_eval_on_train_examples=1,
                                model_fn_creator=create_model_fn,
                                use_tpu_estimator=False, use_tpu=False,
                                num_shards=1, params=None,
                                override_eval_num_epochs=True,
                                save_final_config=False,
                                postprocess_on_cpu=False, export_to_tpu=None,
                                check_configs=None,
                                resume_from_last_good=False,
                                evaluated_checkpoint=None, **kwargs):
  """Builds the Estimator and its input functions from a pipeline config.

  Args:
    run_config: tf.estimator.RunConfig (tpu_config.RunConfig for TPU).
    hparams: optional overrides: an object with .values(), or a dict.
    pipeline_config_path: the pipeline.config file.
    config_override: text-format TrainEvalPipelineConfig merged on top.
    train_steps: overrides train_config.num_steps when given.
    sample_1_of_n_eval_examples: evaluation sampling.
    sample_1_of_n_eval_on_train_examples: sampling of the eval-on-train set.
    model_fn_creator: create_model_fn or a replacement.
    use_tpu_estimator: build a TPUEstimator (also usable with use_tpu False).
    use_tpu: run on TPU.
    num_shards: TPU cores.
    params: extra Estimator params.
    override_eval_num_epochs: evaluate one epoch of each eval input.
    save_final_config: the job trains into model_dir: check the checkpoint
      it resumes from, if any (checkpoint_health), and write the as-run
      pipeline.config there once the training graph is built (and fits
      that checkpoint, see resume_check): a refused launch leaves model_dir
      as it was.
    postprocess_on_cpu: see create_model_fn.
    export_to_tpu: export a TPU SavedModel (TPUEstimator only).
    check_configs: optional fn(configs) run on the configs with every
      override applied, before anything is built or written to model_dir;
      it raises to stop the launch (see launch_check.check).
    resume_from_last_good: when model_dir's latest checkpoint is damaged,
      resume from its newest intact one (see checkpoint_health.resume_point)
      instead of raising errors.UserInputError.
    evaluated_checkpoint: evaluation only: the checkpoint of --checkpoint_dir
      evaluated first; the evaluation graph is checked against it
      (resume_check) before it is restored.
    **kwargs: further generic config overrides (key=value).

  Returns:
    A dict with estimator, train_input_fn, eval_input_fns,
    eval_input_names, eval_on_train_input_fn, predict_input_fn and
    train_steps.
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
    check_configs(configs if _load_pretrained(hparams) else
                  _without_fine_tune_checkpoint(configs))
  saves = run_config.is_chief and save_final_config
  checkpoint = checkpoint_health.resume_point(
      run_config.model_dir, '--model_dir',
      resume_from_last_good) if saves else None
  model_config = configs['model']
  train_config = _train_config_for_device(configs['train_config'], use_tpu)
  train_input_config = configs['train_input_config']
  eval_config = configs['eval_config']
  eval_input_configs = configs['eval_input_configs']
  eval_on_train_input_config = train_input_config.__class__()
  eval_on_train_input_config.CopyFrom(train_input_config)
  eval_on_train_input_config.sample_1_of_n_examples = (
      sample_1_of_n_eval_on_train_examples)
  if override_eval_num_epochs:
    eval_on_train_input_config.num_epochs = 1
  train_steps = train_config.num_steps or None

  detection_model_fn = functools.partial(model_builder.build,
                                         model_config=model_config)
  train_input_fn = MODEL_BUILD_UTIL_MAP['create_train_input_fn'](
      train_config, train_input_config, model_config)
  eval_input_fns = [MODEL_BUILD_UTIL_MAP['create_eval_input_fn'](
      eval_config, config, model_config) for config in eval_input_configs]
  eval_input_names = [config.name or 'eval_%d' % i
                      for i, config in enumerate(eval_input_configs)]
  eval_on_train_input_fn = MODEL_BUILD_UTIL_MAP['create_eval_input_fn'](
      eval_config, eval_on_train_input_config, model_config)
  predict_input_fn = MODEL_BUILD_UTIL_MAP['create_predict_input_fn'](
      model_config, eval_input_configs[0] if eval_input_configs else
      train_input_config)

  model_fn = model_fn_creator(detection_model_fn,
                              dict(configs, train_config=train_config),
                              hparams, use_tpu, postprocess_on_cpu)

  def save():
    config_util.save_pipeline_config(
        config_util.create_pipeline_proto_from_configs(configs),
        estimator.model_dir)
  if saves:
    # Written once the graph is built (and fits the checkpoint resumed from).
    model_fn = resume_check.checked_model_fn(
        model_fn, run_config.model_dir, checkpoint, save)
  elif evaluated_checkpoint:
    model_fn = resume_check.checked_model_fn(
        model_fn, os.path.dirname(evaluated_checkpoint), evaluated_checkpoint,
        lambda: None, evaluating=True)
  if use_tpu_estimator:
    estimator = tpu_estimator.TPUEstimator(
        model_fn=model_fn, train_batch_size=train_config.batch_size,
        eval_batch_size=num_shards * 1 if use_tpu else 1,
        use_tpu=use_tpu, config=run_config,
        export_to_tpu=bool(export_to_tpu),
        eval_on_tpu=False, params=params or {})
  else:
    estimator = estimator_lib.Estimator(model_fn=model_fn, config=run_config,
                                        params=params)
  return {
      'estimator': estimator,
      'train_input_fn': train_input_fn,
      'eval_input_fns': eval_input_fns,
      'eval_input_names': eval_input_names,
      'eval_on_train_input_fn': eval_on_train_input_fn,
      'predict_input_fn': predict_input_fn,
      'train_steps': train_steps,
      'configs': configs,
  }


def create_train_and_eval_specs(train_input_fn, eval_input_fns,
                                eval_on_train_input_fn, predict_input_fn,
                                train_steps, eval_on_train_data=False,
                                final_exporter_name='Servo',
                                eval_spec_names=None, hooks=None,
                                throttle_secs=0, saving_listeners=None,
                                eval_hooks=None):
  """Returns (TrainSpec, [EvalSpec, ...]) for train_and_evaluate.

  The first EvalSpec carries a FinalExporter (`final_exporter_name`) that
  exports a SavedModel fed serialized tf.Examples. `throttle_secs` is the
  least time between two evaluations: 0 evaluates every checkpoint of a
  local run, but makes a cluster's evaluator task poll without pause.
  `saving_listeners` run after each checkpoint is written, before the
  evaluation train_and_evaluate makes of it; `eval_hooks` run in the
  evaluations of the first EvalSpec.
  """
  train_spec = tf.estimator.TrainSpec(input_fn=train_input_fn,
                                      max_steps=train_steps, hooks=hooks,
                                      saving_listeners=saving_listeners)
  eval_spec_names = eval_spec_names or [str(i) for i in
                                        range(len(eval_input_fns))]
  eval_specs = []
  for index, (name, input_fn) in enumerate(zip(eval_spec_names,
                                               eval_input_fns)):
    exporter = (tf.estimator.FinalExporter(name=final_exporter_name,
                                           serving_input_receiver_fn=(
                                               predict_input_fn))
                if index == 0 else None)
    eval_specs.append(tf.estimator.EvalSpec(
        name=name, input_fn=input_fn, steps=None, exporters=exporter,
        throttle_secs=throttle_secs, start_delay_secs=0,
        hooks=eval_hooks if index == 0 else None))
  if eval_on_train_data:
    eval_specs.append(tf.estimator.EvalSpec(
        name='eval_on_train', input_fn=eval_on_train_input_fn, steps=None,
        throttle_secs=throttle_secs, start_delay_secs=0))
  return train_spec, eval_specs


def continuous_eval(estimator, model_dir, input_fn, train_steps, name,
                    max_retries=0, timeout_secs=None, hooks=None,
                    skip_damaged=False):
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
    step = int(os.path.basename(checkpoint).split('-')[-1])
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
