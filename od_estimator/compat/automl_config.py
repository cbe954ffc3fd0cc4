"""Our pipeline.config for resolved automl EfficientDet hparams.

The model is the original's TF2 EfficientDet-D0 layout (ssd with
ssd_efficientnet-b0_bifpn_keras, BiFPN, weight-shared depthwise box
predictor with per-level batch norm, multiscale anchors, focal loss), with
the fields where automl computes otherwise set to automl's computation:

- box coder: automl decodes box codes without scale factors, so the
  faster_rcnn_box_coder scales are 1 (the original's configs have 10, 5);
- padding: automl normalizes the image, then pads it with zeros, as our
  SSD preprocessing does (the extractor's normalization, then the
  resizer), so the resizer keeps its zero padding;
- anchors within a cell: automl's order differs from ours; the converted
  checkpoint reorders the prediction layers' outputs (automl_checkpoint);
- classes: automl has no background class and class i of its head is label
  id i + 1, as ours with add_background_class: false.
"""
import math

from od_estimator import errors
from od_estimator.compat import automl_hparams

PATH_TO_BE_CONFIGURED = 'PATH_TO_BE_CONFIGURED'


def _hyperparams(weight_decay, stddev, initializer):
  return """conv_hyperparams {
        force_use_bias: true
        activation: SWISH
        regularizer { l2_regularizer { weight: %r } }
        initializer { %s { stddev: %r mean: 0.0 } }
        batch_norm { scale: true decay: 0.99 epsilon: 0.001 }
      }""" % (weight_decay, initializer, stddev)


def _post_processing(nms):
  """automl's nms_configs as batch_non_max_suppression.

  automl runs tf.image.non_max_suppression_with_scores per class, as ours:
  'gaussian' is soft-NMS with the op's sigma at half automl's (its sigma
  follows the paper, the op's is twice that), boxes above iou_thresh
  (0.3) dropped and scores at least score_thresh (0.001); 'hard' drops
  boxes above iou_thresh (0.5), any score. Both keep max_output_size per
  class and in all.
  """
  size = nms.get('max_output_size') or 100
  if nms.get('method') in ('hard', '', None):
    sigma, iou, score = 0.0, nms.get('iou_thresh') or 0.5, nms.get(
        'score_thresh') or float('-inf')
  else:
    sigma = (nms.get('sigma') or 0.5) / 2.0
    iou = nms.get('iou_thresh') or 0.3
    score = nms.get('score_thresh') or 0.001
  return """post_processing {
      batch_non_max_suppression {
        score_threshold: %s iou_threshold: %r soft_nms_sigma: %r
        max_detections_per_class: %d max_total_detections: %d
      }
      score_converter: SIGMOID
    }""" % (repr(float(score)) if score != float('-inf') else '-inf',
            float(iou), float(sigma), size, size)


def _learning_rate(hparams, batch_size, examples_per_epoch):
  """automl's cosine schedule: its rate scales with batch_size / 64, its
  epochs are examples_per_epoch / batch_size steps."""
  steps_per_epoch = examples_per_epoch / batch_size
  total = max(1, int(hparams['num_epochs'] * steps_per_epoch))
  warmup = int(hparams['lr_warmup_epoch'] * steps_per_epoch)
  rate = hparams['learning_rate'] * batch_size / 64.0
  if warmup and rate < hparams['lr_warmup_init']:
    # automl would warm up downwards; our cosine schedule refuses to.
    raise errors.UserInputError(
        '--hparams learning_rate=%r at --train_batch_size=%d is %r (automl '
        'scales it by batch / 64), below lr_warmup_init=%r: our warmup only '
        'rises. Give a smaller lr_warmup_init (or lr_warmup_epoch=0).' % (
            hparams['learning_rate'], batch_size, rate,
            hparams['lr_warmup_init']))
  return total, """learning_rate {
        cosine_decay_learning_rate {
          learning_rate_base: %r total_steps: %d
          warmup_learning_rate: %r warmup_steps: %d
        }
      }""" % (rate, total,
              float(hparams['lr_warmup_init']), min(warmup, total))


def _optimizer(hparams, batch_size, examples_per_epoch):
  total, rate = _learning_rate(hparams, batch_size, examples_per_epoch)
  if hparams['optimizer'] == 'adam':
    body = 'adam_optimizer { %s }' % rate
  else:
    body = 'momentum_optimizer { %s momentum_optimizer_value: %r }' % (
        rate, float(hparams['momentum']))
  return total, """optimizer {
    %s
    use_moving_average: %s moving_average_decay: %r
  }""" % (body, 'true' if hparams['moving_average_decay'] else 'false',
          float(hparams['moving_average_decay'] or 0.9999))


def _input_reader(label_map_path, input_path, max_boxes=None):
  extra = ('max_number_of_boxes: %d ' % max_boxes if max_boxes else
           'shuffle: false num_epochs: 1 ')
  return """{
  label_map_path: "%s"
  %stf_record_input_reader { input_path: "%s" }
}""" % (label_map_path, extra, input_path)


def pipeline_text(hparams, checkpoint_path, label_map_path,
                  freeze_variables=(),
                  batch_size=automl_hparams.TRAIN_BATCH_SIZE,
                  examples_per_epoch=automl_hparams.NUM_EXAMPLES_PER_EPOCH,
                  training_file_pattern=PATH_TO_BE_CONFIGURED,
                  validation_file_pattern=PATH_TO_BE_CONFIGURED):
  """The pipeline.config text of resolved hparams (automl_hparams.resolve).

  Args:
    hparams: dict of automl hparams.
    checkpoint_path: the converted checkpoint (fine_tune_checkpoint, full).
    label_map_path: the label map the input readers name.
    freeze_variables: regular expressions of our variables (from
      var_freeze_expr).
    batch_size: automl's --train_batch_size (scales the learning rate).
    examples_per_epoch: automl's --num_examples_per_epoch.
    training_file_pattern: TFRecords to train on.
    validation_file_pattern: TFRecords to evaluate on.
  """
  size = hparams['image_size']
  ratios = ', '.join(repr(r) for r in automl_hparams.aspect_ratios(hparams))
  weight_method = automl_hparams.WEIGHT_METHODS[hparams['fpn_weight_method']]
  total, optimizer = _optimizer(hparams, batch_size, examples_per_epoch)
  freeze = ''.join('\n  freeze_variables: "%s"' % expression.replace(
      '\\', '\\\\') for expression in freeze_variables)
  return """# automl EfficientDet %(name)s, by od-estimator convert_automl.
model {
  ssd {
    inplace_batchnorm_update: true
    freeze_batchnorm: false
    num_classes: %(num_classes)d
    add_background_class: false
    box_coder { faster_rcnn_box_coder {
      y_scale: 1.0 x_scale: 1.0 height_scale: 1.0 width_scale: 1.0 } }
    matcher { argmax_matcher {
      matched_threshold: 0.5 unmatched_threshold: 0.5
      ignore_thresholds: false negatives_lower_than_unmatched: true
      force_match_for_each_row: true use_matmul_gather: true } }
    similarity_calculator { iou_similarity {} }
    encode_background_as_zeros: true
    anchor_generator { multiscale_anchor_generator {
      min_level: %(min_level)d max_level: %(max_level)d
      anchor_scale: %(anchor_scale)r aspect_ratios: [%(ratios)s]
      scales_per_octave: %(num_scales)d } }
    image_resizer { keep_aspect_ratio_resizer {
      min_dimension: %(size)d max_dimension: %(size)d
      pad_to_max_dimension: true } }
    box_predictor { weight_shared_convolutional_box_predictor {
      depth: %(filters)d
      class_prediction_bias_init: %(bias_init)r
      %(predictor_hyperparams)s
      num_layers_before_predictor: %(box_class_repeats)d
      kernel_size: 3
      use_depthwise: true } }
    feature_extractor {
      type: 'ssd_efficientnet-b0_bifpn_keras'
      bifpn { min_level: %(min_level)d max_level: %(max_level)d
        num_iterations: %(fpn_cell_repeats)d num_filters: %(filters)d
        combine_method: '%(weight_method)s' }
      %(extractor_hyperparams)s
    }
    loss {
      classification_loss { weighted_sigmoid_focal {
        alpha: %(alpha)r gamma: %(gamma)r } }
      localization_loss { weighted_smooth_l1 { delta: %(delta)r } }
      classification_weight: 1.0
      localization_weight: %(box_loss_weight)r
    }
    normalize_loss_by_num_matches: true
    normalize_loc_loss_by_codesize: true
    %(post_processing)s
  }
}
train_config {
  fine_tune_checkpoint: "%(checkpoint)s"
  fine_tune_checkpoint_type: "full"
  batch_size: %(batch_size)d
  num_steps: %(total)d
  gradient_clipping_by_norm: %(clip)r
  unpad_groundtruth_tensors: false%(flip)s
  data_augmentation_options { random_scale_crop_and_pad_to_square {
    output_size: %(size)d scale_min: %(jitter_min)r scale_max: %(jitter_max)r
  } }
  %(optimizer)s%(freeze)s
}
train_input_reader %(train_input)s
eval_config {
  metrics_set: "coco_detection_metrics"
  use_moving_averages: false
  batch_size: 1
}
eval_input_reader %(eval_input)s
""" % dict(
    name=hparams['name'], num_classes=hparams['num_classes'],
    min_level=hparams['min_level'], max_level=hparams['max_level'],
    anchor_scale=float(hparams['anchor_scale']), ratios=ratios,
    num_scales=hparams['num_scales'], size=size,
    filters=hparams['fpn_num_filters'],
    bias_init=-math.log((1 - 0.01) / 0.01),
    predictor_hyperparams=_hyperparams(
        float(hparams['weight_decay']), 0.01, 'random_normal_initializer'),
    extractor_hyperparams=_hyperparams(
        float(hparams['weight_decay']), 0.03,
        'truncated_normal_initializer'),
    box_class_repeats=hparams['box_class_repeats'],
    fpn_cell_repeats=hparams['fpn_cell_repeats'],
    weight_method=weight_method, alpha=float(hparams['alpha']),
    gamma=float(hparams['gamma']), delta=float(hparams['delta']),
    box_loss_weight=float(hparams['box_loss_weight']),
    post_processing=_post_processing(hparams['nms_configs']),
    checkpoint=checkpoint_path, batch_size=batch_size, total=total,
    clip=float(hparams['clip_gradients_norm'] or 0.0),
    flip=('\n  data_augmentation_options { random_horizontal_flip {} }'
          if hparams['input_rand_hflip'] else ''),
    jitter_min=float(hparams['jitter_min']),
    jitter_max=float(hparams['jitter_max']), optimizer=optimizer,
    freeze=freeze,
    train_input=_input_reader(label_map_path, training_file_pattern,
                              hparams['max_instances_per_image']),
    eval_input=_input_reader(label_map_path, validation_file_pattern))


def label_map_text(items):
  """A string_int_label_map text of [(id, name)]."""
  return ''.join('item {\n  id: %d\n  name: "%s"\n}\n' % (
      label_id, name.replace('"', '\\"')) for label_id, name in items)
