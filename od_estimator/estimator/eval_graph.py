"""The evaluation half of model_fn: the evaluators' dict, metric ops, losses.

Used by model_lib.create_model_fn in EVAL mode, on CPU/GPU (metric ops) and
on TPU (a host metric_fn over outfed tensors).
"""
import tensorflow as tf

from od_estimator.metrics import eval_plots
from od_estimator.metrics import eval_util
from od_estimator.input_pipeline import inputs
from od_estimator.estimator import training_graph
from od_estimator.core import standard_fields as fields
from od_estimator.config import config_util
from od_estimator.utils import label_map_util

_IN = fields.InputDataFields


def eval_categories(eval_input_config, num_classes):
  return label_map_util.create_categories_from_labelmap(
      eval_input_config.label_map_path) if eval_input_config.label_map_path \
      else [{'id': i, 'name': 'category_%d' % i}
            for i in range(1, num_classes + 1)]


def build_eval_dict(labels, features, detections, eval_input_config,
                     reframe_masks=True):
  """The evaluators' batched dict: detections and groundtruth from labels.

  Masks stay unframed (reframe_masks=False) in a TPU computation: the
  host's metric_fn converts them (eval_util.masks_to_original_images).
  """
  groundtruth = eval_util.groundtruth_from_labels(
      labels, eval_input_config.max_number_of_boxes)
  # The retained uint8 image (eval_config.retain_original_images) is the
  # one drawn in the evaluation images.
  images = features.get(_IN.original_image, features[_IN.image])
  return eval_util.result_dict_for_batched_example(
      images, features[inputs.HASH_KEY], detections,
      groundtruth, scale_to_absolute=True,
      original_image_spatial_shapes=features[
          _IN.original_image_spatial_shape],
      true_image_shapes=features[_IN.true_image_shape],
      reframe_masks=reframe_masks)


def build_eval_metric_ops(eval_dict, losses, configs, images=False,
                          plots=False):
  """Metric ops of eval_config.metrics_set, mean losses, evaluation images.

  With `images` (the eval dict holds the retained original images) the
  first eval_config.num_visualizations images are also written, side by
  side with their groundtruth, to the eval events; with `plots` the
  precision-recall curves and confusion matrix (metrics/eval_plots).
  """
  eval_config = configs['eval_config']
  categories = eval_categories(configs['eval_input_configs'][0],
                           config_util.get_number_of_classes(configs['model']))
  metric_ops = eval_util.get_eval_metric_ops_for_evaluators(
      eval_config, categories, eval_dict)
  for name, loss in losses.items():
    metric_ops[name] = tf.compat.v1.metrics.mean(loss)
  if images:
    metric_ops.update(eval_util.visualization_metric_ops(
        eval_config, categories, eval_dict))
  if plots:
    metric_ops.update(eval_plots.EvalPlots(
        categories, eval_config.min_score_threshold, worst_images=images)
                      .get_estimator_eval_metric_ops(eval_dict))
  return metric_ops


def build_eval_losses(model, prediction_dict, features, configs):
  """({'Loss/...': scalar}, total loss) of an evaluation step.

  With eval_config.use_dummy_loss_in_eval the model's loss is not computed:
  Loss/total_loss is the constant 1.0, the only loss reported (as the
  original).
  """
  if configs['eval_config'].use_dummy_loss_in_eval:
    total_loss = tf.constant(1.0, name='total_loss')
    return {'Loss/total_loss': total_loss}, total_loss
  return training_graph.build_losses(model, prediction_dict,
                                     features[_IN.true_image_shape],
                                     configs['train_config'])


def build_tpu_eval_metrics(eval_dict, losses, configs, images=False,
                           plots=False):
  """Returns (metric_fn, tensors) for TPUEstimatorSpec.eval_metrics.

  On a TPU the tensors are outfed and concatenated across shards, so each
  must keep a leading batch dimension: the eval dict already does, and the
  scalar losses travel as [1] tensors (their mean is unchanged).
  """
  tensors = dict(eval_dict)
  for name, loss in losses.items():
    tensors[name] = tf.reshape(loss, [1])

  def metric_fn(**batched):
    batched_losses = {name: batched.pop(name) for name in losses}
    return build_eval_metric_ops(
        eval_util.masks_to_original_images(batched), batched_losses,
        configs, images, plots)
  return metric_fn, tensors
