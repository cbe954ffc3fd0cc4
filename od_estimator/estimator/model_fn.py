"""The model_fn: one `model_fn(features, labels, mode, params)` for
`tf.estimator.Estimator` and `TPUEstimator`.

`create_model_fn` hands each mode to its own function (`build_train_spec`,
`build_eval_spec`, `build_predict_spec`), and `estimator_spec` turns each
into a TPUEstimatorSpec (scaffold_fn) or an EstimatorSpec (scaffold). The
halves they call are testable alone: losses and train op in training_graph,
checkpoint initialization in fine_tune, the eval dict and metrics in
eval_graph, the moving-average restore in moving_averages, the exported
dict below (`output_dict_for_export`).
"""
import dataclasses
import functools
from typing import Callable, Optional

import tensorflow as tf
from tensorflow_estimator.python.estimator.tpu import tpu_estimator

from od_estimator.builders import graph_rewriter_builder
from od_estimator.core import standard_fields as fields
from od_estimator.estimator import eval_graph
from od_estimator.estimator import fine_tune
from od_estimator.estimator import moving_averages
from od_estimator.estimator import training_graph
from od_estimator.input_pipeline import inputs
from od_estimator.utils import graph_building

_IN = fields.InputDataFields
_DET = fields.DetectionResultFields
_ModeKeys = tf.estimator.ModeKeys

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
                                      tf.float32) + fields.LABEL_ID_OFFSET,
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
# model_fn: one function per mode, each returning its spec.

@dataclasses.dataclass(frozen=True)
class ModelFnOptions:
  """What the model_fn of create_model_fn builds every mode with.

  Attributes:
    detection_model_fn: fn(is_training, add_summaries) -> DetectionModel.
    configs: a configs dict (config_util).
    use_tpu: build for a TPU (CrossShardOptimizer, bfloat16).
    postprocess_on_cpu: run post-processing outside the TPU computation.
    load_pretrained: initialize from train_config.fine_tune_checkpoint.
    allow_partial_fine_tune: see fine_tune.restore_map.
    optimizer_wrapper: see training_graph.build_train_op.
    eval_plots: evaluations also write metrics/eval_plots' images.
  """
  detection_model_fn: Callable
  configs: dict
  use_tpu: bool = False
  postprocess_on_cpu: bool = False
  load_pretrained: bool = True
  allow_partial_fine_tune: bool = False
  optimizer_wrapper: Optional[Callable] = None
  eval_plots: bool = False

  @property
  def train_config(self):
    return self.configs['train_config']

  @property
  def eval_config(self):
    return self.configs['eval_config']

  @property
  def eval_input_config(self):
    """The first eval input's config (the train input's when none)."""
    eval_input_configs = self.configs['eval_input_configs']
    return (eval_input_configs[0] if eval_input_configs else
            self.configs['train_input_config'])

  @property
  def graph_rewriter_config(self):
    return self.configs.get('graph_rewriter_config')


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


def load_pretrained(hparams):
  """hparams' load_pretrained; default True."""
  return _hparam(hparams, 'load_pretrained', True)


def _rewrite_graph(graph_rewriter_config, is_training):
  """Applies a graph_rewriter (quantization) to the default graph, if any."""
  if graph_rewriter_config is not None:
    graph_rewriter_builder.build(graph_rewriter_config,
                                 is_training=is_training)()


def _build_model(options, is_training):
  return options.detection_model_fn(is_training=is_training,
                                    add_summaries=not options.use_tpu)


def _give_groundtruth(options, model, labels, training=False):
  """Gives `model` the batch's groundtruth; returns the per-image labels.

  Off TPU the padding rows are sliced off as unpad_groundtruth_tensors
  says, and in training also when the model's losses ignore them
  (model.ignores_groundtruth_padding(): the same losses and gradients, bit
  for bit, without target assignment over max_number_of_boxes rows an
  image; EfficientDet-D0's config pads to 100 against 49,104 anchors).
  """
  labels = unstack_batch(labels, unpad_groundtruth_tensors=(
      not options.use_tpu and (
          options.train_config.unpad_groundtruth_tensors or
          (training and model.ignores_groundtruth_padding()))))
  provide_groundtruth(model, labels)
  return labels


def _predict(options, model, features):
  """model.predict on the batch, in bfloat16 on TPU when the config asks.

  The model's side inputs (get_side_inputs) come from the features too.
  Predictions computed in bfloat16 are returned cast to float32.
  """
  images = features[_IN.image]
  true_image_shapes = features[_IN.true_image_shape]
  side_inputs = model.get_side_inputs(features)
  if not (options.use_tpu and options.train_config.use_bfloat16):
    return model.predict(images, true_image_shapes, **side_inputs)
  with tf.compat.v1.tpu.bfloat16_scope():
    prediction_dict = model.predict(images, true_image_shapes, **side_inputs)
  return {key: tf.cast(value, tf.float32)
          if getattr(value, 'dtype', None) == tf.bfloat16 else value
          for key, value in prediction_dict.items()}


def _postprocess(options, model, prediction_dict, features):
  """The detections; outside the TPU computation with postprocess_on_cpu."""
  postprocess = functools.partial(
      model.postprocess, true_image_shapes=features[_IN.true_image_shape])
  if options.use_tpu and options.postprocess_on_cpu:
    return tf.compat.v1.tpu.outside_compilation(postprocess, prediction_dict)
  return postprocess(prediction_dict)


def estimator_spec(tpu_spec, mode, scaffold_fn, **spec_fields):
  """The spec of `mode` for TPUEstimator (tpu_spec) or Estimator.

  Args:
    tpu_spec: return a TPUEstimatorSpec given `scaffold_fn`; otherwise an
      EstimatorSpec given the scaffold it builds.
    mode: a tf.estimator.ModeKeys.
    scaffold_fn: fn() -> tf.compat.v1.train.Scaffold, or None (the
      Estimator's default scaffold).
    **spec_fields: the spec's other fields (loss, train_op, predictions,
      ..., TPUEstimatorSpec's eval_metrics or EstimatorSpec's
      eval_metric_ops).
  """
  if tpu_spec:
    return tpu_estimator.TPUEstimatorSpec(mode=mode, scaffold_fn=scaffold_fn,
                                          **spec_fields)
  return tf.estimator.EstimatorSpec(
      mode=mode, scaffold=scaffold_fn() if scaffold_fn else None,
      **spec_fields)


def _restore_scaffold_fn(options):
  """EVAL's and PREDICT's scaffold_fn: the weights the exporter uses too
  (the moving averages with eval_config.use_moving_averages)."""
  return moving_averages.scaffold_fn(options.eval_config.use_moving_averages)


def build_train_spec(options, features, labels, tpu_spec):
  """TRAIN: losses (and their summaries), fine-tuning, the train op.

  Args:
    options: ModelFnOptions.
    features: the input_fn's batched features.
    labels: the input_fn's batched labels.
    tpu_spec: return a TPUEstimatorSpec (see estimator_spec).
  """
  train_config = options.train_config
  model = _build_model(options, is_training=True)
  _give_groundtruth(options, model, labels, training=True)
  prediction_dict = _predict(options, model, features)
  losses, total_loss = training_graph.build_losses(
      model, prediction_dict, features[_IN.true_image_shape], train_config)
  if not options.use_tpu:
    for name, loss in losses.items():
      training_graph.scalar_summary(name, loss)
  scaffold_fn = fine_tune.build_scaffold_fn(
      model, train_config, options.use_tpu, options.load_pretrained,
      options.allow_partial_fine_tune)
  # As the original: after the loss, before the optimizer (so gradients
  # flow through the FakeQuant ops); fine-tune restores float weights.
  _rewrite_graph(options.graph_rewriter_config, is_training=True)
  # TPU training loops cannot run the Assert; TPUEstimator (also off TPU)
  # keeps only its NanTensorHook.
  train_op = training_graph.build_train_op(
      total_loss, model, train_config, options.use_tpu,
      check_finite_loss=not tpu_spec,
      optimizer_wrapper=options.optimizer_wrapper)
  return estimator_spec(tpu_spec, _ModeKeys.TRAIN, scaffold_fn,
                        loss=total_loss, train_op=train_op)


def build_eval_spec(options, features, labels, tpu_spec):
  """EVAL: detections, losses and the evaluators' metrics.

  Args: as build_train_spec's.
  """
  model = _build_model(options, is_training=False)
  labels = _give_groundtruth(options, model, labels)
  prediction_dict = _predict(options, model, features)
  detections = _postprocess(options, model, prediction_dict, features)
  losses, total_loss = eval_graph.build_eval_losses(
      model, prediction_dict, features, options.configs)
  _rewrite_graph(options.graph_rewriter_config, is_training=False)
  eval_dict = eval_graph.build_eval_dict(
      labels, features, detections, options.eval_input_config,
      reframe_masks=not tpu_spec)
  return estimator_spec(
      tpu_spec, _ModeKeys.EVAL, _restore_scaffold_fn(options),
      loss=total_loss,
      **_eval_metrics(options, eval_dict, losses, features, tpu_spec))


def _eval_metrics(options, eval_dict, losses, features, tpu_spec):
  """{'eval_metrics': (metric_fn, tensors)} for a TPUEstimatorSpec, else
  {'eval_metric_ops': {name: (value, update)}} for an EstimatorSpec."""
  images = _IN.original_image in features
  if tpu_spec:
    # As the original, no images from TPU evaluations.
    return {'eval_metrics': eval_graph.build_tpu_eval_metrics(
        eval_dict, losses, options.configs,
        images=not options.use_tpu and images,
        plots=not options.use_tpu and options.eval_plots)}
  return {'eval_metric_ops': eval_graph.build_eval_metric_ops(
      eval_dict, losses, options.configs, images=images,
      plots=options.eval_plots)}


def build_predict_spec(options, features, labels, tpu_spec):
  """PREDICT (and the Servo export): the detections as exports serve them.

  Args: as build_train_spec's; labels are unused.
  """
  del labels  # Unused: nothing to compare the detections with.
  model = _build_model(options, is_training=False)
  prediction_dict = _predict(options, model, features)
  detections = _postprocess(options, model, prediction_dict, features)
  # Also for the Servo export (the original rewrote only TRAIN and EVAL),
  # so it serves the same quantized graph as the exporter.
  _rewrite_graph(options.graph_rewriter_config, is_training=False)
  predictions, export_outputs = _build_export_outputs(detections)
  return estimator_spec(tpu_spec, _ModeKeys.PREDICT,
                        _restore_scaffold_fn(options),
                        predictions=predictions,
                        export_outputs=export_outputs)


_SPEC_BUILDERS = {
    _ModeKeys.TRAIN: build_train_spec,
    _ModeKeys.EVAL: build_eval_spec,
    _ModeKeys.PREDICT: build_predict_spec,
}


def create_model_fn(detection_model_fn, configs, hparams=None, use_tpu=False,
                    postprocess_on_cpu=False, optimizer_wrapper=None,
                    eval_plots=False):
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
    eval_plots: evaluations also write metrics/eval_plots' images.
  """
  options = ModelFnOptions(
      detection_model_fn, configs, use_tpu=use_tpu,
      postprocess_on_cpu=postprocess_on_cpu,
      load_pretrained=load_pretrained(hparams),
      allow_partial_fine_tune=_hparam(hparams, 'allow_partial_fine_tune',
                                      False),
      optimizer_wrapper=optimizer_wrapper, eval_plots=eval_plots)
  if options.graph_rewriter_config is not None:
    # Bad bit widths are refused here, before any graph is built.
    graph_rewriter_builder.build(options.graph_rewriter_config,
                                 is_training=True)

  def build_spec(features, labels, mode, params):
    tpu_spec = use_tpu or _called_by_tpu_estimator(params)
    return _SPEC_BUILDERS[mode](options, features, labels, tpu_spec)
  # Under a distribution strategy the Estimator calls model_fn through
  # call_for_each_replica, whose AutoGraph conversion would rewrite (and
  # break on) the model's plain graph-building Python.
  unconverted = tf.autograph.experimental.do_not_convert(
      graph_building.identity_equality()(build_spec))

  def model_fn(features, labels, mode, params=None):
    return unconverted(features, labels, mode, params)
  return model_fn
