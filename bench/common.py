"""Shared pieces of the benchmarks: the SSD config, data, clocks, results.

Each benchmark script runs as its own process (so peak memory is its own)
and, with --json, ends by printing one line `RESULT {json}` that
bench/run_all.py collects into bench/RESULTS.md.
"""
import json
import os
import resource
import time

import tensorflow as tf

import efficientdet  # pylint: disable=g-bad-import-order  (bench/)
from od_estimator.dataset_tools import create_synthetic_tf_record

# The shapes data's inputs and COCO evaluation, shared by every config below.
_SHAPES_INPUTS = """
train_input_reader {
  tf_record_input_reader { input_path: "%(data)s/shapes_train.record-*" }
  label_map_path: "%(data)s/shapes_label_map.pbtxt"
}
eval_config { metrics_set: "coco_detection_metrics" }
eval_input_reader {
  tf_record_input_reader { input_path: "%(data)s/shapes_val.record-*" }
  label_map_path: "%(data)s/shapes_label_map.pbtxt"
  shuffle: false num_readers: 1
}
"""


# SSD MobileNet v2 as in the original's samples/configs/ssd_mobilenet_v2_coco
# .config (anchors, predictor, losses, hard example mining, RMSProp,
# random_horizontal_flip + ssd_random_crop), with the size, depth, batch and
# class count of a benchmark; inputs point at synthetic shapes records.
SSD_CONFIG = """
model { ssd {
  num_classes: 3
  box_coder { faster_rcnn_box_coder {
    y_scale: 10.0 x_scale: 10.0 height_scale: 5.0 width_scale: 5.0 } }
  matcher { argmax_matcher {
    matched_threshold: 0.5 unmatched_threshold: 0.5 ignore_thresholds: false
    negatives_lower_than_unmatched: true force_match_for_each_row: true } }
  similarity_calculator { iou_similarity {} }
  anchor_generator { ssd_anchor_generator {
    num_layers: 6 min_scale: 0.2 max_scale: 0.95
    aspect_ratios: [1.0, 2.0, 0.5, 3.0, 0.3333] } }
  image_resizer { fixed_shape_resizer { height: %(size)d width: %(size)d } }
  box_predictor { convolutional_box_predictor {
    min_depth: 0 max_depth: 0 num_layers_before_predictor: 0
    use_dropout: false kernel_size: 3 box_code_size: 4
    apply_sigmoid_to_scores: false
    conv_hyperparams {
      activation: RELU_6
      regularizer { l2_regularizer { weight: 0.00004 } }
      initializer { truncated_normal_initializer { stddev: 0.03 } }
      batch_norm { train: true scale: true center: true decay: 0.9997
                   epsilon: 0.001 } } } }
  feature_extractor {
    type: 'ssd_mobilenet_v2' min_depth: 16 depth_multiplier: %(depth)s
    use_depthwise: true
    conv_hyperparams {
      activation: RELU_6
      regularizer { l2_regularizer { weight: 0.00004 } }
      initializer { truncated_normal_initializer { stddev: 0.03 } }
      batch_norm { train: true scale: true center: true decay: 0.9997
                   epsilon: 0.001 } } }
  loss {
    classification_loss { weighted_sigmoid {} }
    localization_loss { weighted_smooth_l1 {} }
    hard_example_miner {
      num_hard_examples: 3000 iou_threshold: 0.99 loss_type: CLASSIFICATION
      max_negatives_per_positive: 3 min_negatives_per_image: 3 }
    classification_weight: 1.0 localization_weight: 1.0 }
  normalize_loss_by_num_matches: true
  post_processing {
    batch_non_max_suppression {
      score_threshold: 1e-8 iou_threshold: 0.6
      max_detections_per_class: 100 max_total_detections: 100 }
    score_converter: SIGMOID }
} }
train_config {
  batch_size: %(batch)d
  optimizer { rms_prop_optimizer {
    learning_rate { exponential_decay_learning_rate {
      initial_learning_rate: 0.004 decay_steps: 800720 decay_factor: 0.95 } }
    momentum_optimizer_value: 0.9 decay: 0.9 epsilon: 1.0 } }
  data_augmentation_options { random_horizontal_flip {} }
  data_augmentation_options { ssd_random_crop {} }
}
""" + _SHAPES_INPUTS


# RetinaNet as in the original's ssd_resnet50_v1_fpn_shared_box_predictor
# _640x640_coco14_sync.config (ResNet50 FPN levels 3-7, weight-shared
# predictor, focal loss, momentum), at the size, batch and class count of a
# benchmark, with horizontal flips; what the Model Garden peer also trains.
RETINANET_CONFIG = """
model { ssd {
  inplace_batchnorm_update: true
  num_classes: 3
  box_coder { faster_rcnn_box_coder {
    y_scale: 10.0 x_scale: 10.0 height_scale: 5.0 width_scale: 5.0 } }
  matcher { argmax_matcher {
    matched_threshold: 0.5 unmatched_threshold: 0.5 ignore_thresholds: false
    negatives_lower_than_unmatched: true force_match_for_each_row: true
    use_matmul_gather: true } }
  similarity_calculator { iou_similarity {} }
  encode_background_as_zeros: true
  anchor_generator { multiscale_anchor_generator {
    min_level: 3 max_level: 7 anchor_scale: 4.0
    aspect_ratios: [1.0, 2.0, 0.5] scales_per_octave: 2 } }
  image_resizer { fixed_shape_resizer { height: %(size)d width: %(size)d } }
  box_predictor { weight_shared_convolutional_box_predictor {
    depth: 256 class_prediction_bias_init: -4.6 num_layers_before_predictor: 4
    kernel_size: 3
    conv_hyperparams {
      activation: RELU_6
      regularizer { l2_regularizer { weight: 0.0004 } }
      initializer { random_normal_initializer { stddev: 0.01 } }
      batch_norm { scale: true decay: 0.997 epsilon: 0.001 } } } }
  feature_extractor {
    type: 'ssd_resnet50_v1_fpn' min_depth: 16 depth_multiplier: %(depth)s
    override_base_feature_extractor_hyperparams: true
    conv_hyperparams {
      activation: RELU_6
      regularizer { l2_regularizer { weight: 0.0004 } }
      initializer { truncated_normal_initializer { stddev: 0.03 } }
      batch_norm { scale: true decay: 0.997 epsilon: 0.001 } } }
  loss {
    classification_loss { weighted_sigmoid_focal { alpha: 0.25 gamma: 2.0 } }
    localization_loss { weighted_smooth_l1 {} }
    classification_weight: 1.0 localization_weight: 1.0 }
  normalize_loss_by_num_matches: true
  normalize_loc_loss_by_codesize: true
  post_processing {
    batch_non_max_suppression {
      score_threshold: 1e-8 iou_threshold: 0.6
      max_detections_per_class: 100 max_total_detections: 100 }
    score_converter: SIGMOID }
} }
train_config {
  batch_size: %(batch)d
  optimizer { momentum_optimizer {
    learning_rate { constant_learning_rate { learning_rate: 0.01 } }
    momentum_optimizer_value: 0.9 } }
  data_augmentation_options { random_horizontal_flip {} }
}
""" + _SHAPES_INPUTS


# Faster R-CNN ResNet-50 as in the original's faster_rcnn_resnet50_coco
# .config (stride-16 anchors, 300 proposals, 14x14 crops max-pooled to 7x7,
# 64 sampled proposals, frozen batch norm, momentum, gradient clipping), at
# a fixed size, the batch and class count of a benchmark.
FASTER_RCNN_CONFIG = """
model { faster_rcnn {
  num_classes: 3
  image_resizer { fixed_shape_resizer { height: %(size)d width: %(size)d } }
  feature_extractor {
    type: 'faster_rcnn_resnet50' first_stage_features_stride: 16 }
  first_stage_anchor_generator { grid_anchor_generator {
    scales: [0.25, 0.5, 1.0, 2.0] aspect_ratios: [0.5, 1.0, 2.0]
    height_stride: 16 width_stride: 16 } }
  first_stage_box_predictor_conv_hyperparams {
    op: CONV
    initializer { truncated_normal_initializer { stddev: 0.01 } } }
  first_stage_nms_iou_threshold: 0.7
  first_stage_max_proposals: 300
  first_stage_localization_loss_weight: 2.0
  initial_crop_size: 14 maxpool_kernel_size: 2 maxpool_stride: 2
  second_stage_box_predictor { mask_rcnn_box_predictor {
    fc_hyperparams {
      op: FC
      initializer { variance_scaling_initializer {
        factor: 1.0 uniform: true mode: FAN_AVG } } } } }
  second_stage_post_processing {
    batch_non_max_suppression {
      iou_threshold: 0.6 max_detections_per_class: 100
      max_total_detections: 300 }
    score_converter: SOFTMAX }
  second_stage_localization_loss_weight: 2.0
} }
train_config {
  batch_size: %(batch)d
  optimizer { momentum_optimizer {
    learning_rate { constant_learning_rate { learning_rate: 0.0003 } }
    momentum_optimizer_value: 0.9 }
    use_moving_average: false }
  gradient_clipping_by_norm: 10.0
  data_augmentation_options { random_horizontal_flip {} }
}
""" + _SHAPES_INPUTS


def _with(text, additions):
  """text with each {anchor: addition} inserted after its one anchor."""
  for anchor, addition in additions.items():
    assert text.count(anchor) == 1, anchor
    text = text.replace(anchor, anchor + addition)
  return text


# Mask R-CNN: the Faster R-CNN above with the third stage and the mask head
# of the original's mask_rcnn_resnet50_atrous_coco.config (33x33 masks, four
# convolutions, automatic depth: 32 for 3 classes, mask loss weight 4), on
# the records' PNG masks. The body stays item 8's stride 16 (the original's
# atrous config runs block3 at stride 8), so items 8 and 9 differ by the
# mask branch alone.
MASK_RCNN_CONFIG = _with(FASTER_RCNN_CONFIG, {
    'num_classes: 3': '\n  number_of_stages: 3',
    'mask_rcnn_box_predictor {': """
    predict_instance_masks: true mask_height: 33 mask_width: 33
    mask_prediction_conv_depth: 0 mask_prediction_num_conv_layers: 4
    conv_hyperparams {
      op: CONV
      initializer { truncated_normal_initializer { stddev: 0.01 } } }""",
    'second_stage_localization_loss_weight: 2.0':
        '\n  second_stage_mask_prediction_loss_weight: 4.0',
}).replace('shapes_label_map.pbtxt"', 'shapes_label_map.pbtxt"\n'
           '  load_instance_masks: true mask_type: PNG_MASKS')
# R-FCN: the Faster R-CNN above with the second stage of the original's
# rfcn_resnet101_coco.config (block4 once on the whole feature map,
# position-sensitive 3x3 bins over 18x18 crops; no ROI crop), on the same
# ResNet-50 body, so items 1c and 1d differ by the second stage alone.
RFCN_CONFIG = FASTER_RCNN_CONFIG.replace(
    '  initial_crop_size: 14 maxpool_kernel_size: 2 maxpool_stride: 2\n',
    '').replace("""mask_rcnn_box_predictor {
    fc_hyperparams {
      op: FC
      initializer { variance_scaling_initializer {
        factor: 1.0 uniform: true mode: FAN_AVG } } } }""",
                """rfcn_box_predictor {
    conv_hyperparams {
      op: CONV
      initializer { truncated_normal_initializer { stddev: 0.01 } } }
    crop_height: 18 crop_width: 18
    num_spatial_bins_height: 3 num_spatial_bins_width: 3 }""")
assert 'rfcn_box_predictor' in RFCN_CONFIG and 'initial_crop' not in RFCN_CONFIG
# The original's TF2 faster_rcnn_resnet50_v1_640x640_coco17_tpu-8.config
# (the faster_rcnn_resnet50_keras extractor: its Keras ResNet-50, batch norm
# trainable, static shapes, matrix-product crops, the static sampler) with
# nothing changed but the class count, the image size, the batch and the
# inputs (no fine-tune checkpoint: random weights, as every bench model).
FASTER_RCNN_KERAS_CONFIG = """
model { faster_rcnn {
  num_classes: 3
  image_resizer { keep_aspect_ratio_resizer {
    min_dimension: %(size)d max_dimension: %(size)d
    pad_to_max_dimension: true } }
  feature_extractor {
    type: 'faster_rcnn_resnet50_keras' batch_norm_trainable: true }
  first_stage_anchor_generator { grid_anchor_generator {
    scales: [0.25, 0.5, 1.0, 2.0] aspect_ratios: [0.5, 1.0, 2.0]
    height_stride: 16 width_stride: 16 } }
  first_stage_box_predictor_conv_hyperparams {
    op: CONV
    regularizer { l2_regularizer { weight: 0.0 } }
    initializer { truncated_normal_initializer { stddev: 0.01 } } }
  first_stage_nms_score_threshold: 0.0
  first_stage_nms_iou_threshold: 0.7
  first_stage_max_proposals: 300
  first_stage_localization_loss_weight: 2.0
  first_stage_objectness_loss_weight: 1.0
  initial_crop_size: 14 maxpool_kernel_size: 2 maxpool_stride: 2
  second_stage_box_predictor { mask_rcnn_box_predictor {
    use_dropout: false dropout_keep_probability: 1.0
    fc_hyperparams {
      op: FC
      regularizer { l2_regularizer { weight: 0.0 } }
      initializer { variance_scaling_initializer {
        factor: 1.0 uniform: true mode: FAN_AVG } } }
    share_box_across_classes: true } }
  second_stage_post_processing {
    batch_non_max_suppression {
      score_threshold: 0.0 iou_threshold: 0.6
      max_detections_per_class: 100 max_total_detections: 300 }
    score_converter: SOFTMAX }
  second_stage_localization_loss_weight: 2.0
  second_stage_classification_loss_weight: 1.0
  use_static_shapes: true
  use_matmul_crop_and_resize: true
  clip_anchors_to_image: true
  use_static_balanced_label_sampler: true
  use_matmul_gather_in_matcher: true
} }
train_config {
  batch_size: %(batch)d
  optimizer { momentum_optimizer {
    learning_rate { cosine_decay_learning_rate {
      learning_rate_base: .04 total_steps: 25000
      warmup_learning_rate: .013333 warmup_steps: 2000 } }
    momentum_optimizer_value: 0.9 }
    use_moving_average: false }
  data_augmentation_options { random_horizontal_flip {} }
  max_number_of_boxes: 100
  unpad_groundtruth_tensors: false
  # The sample config says true; float32 here on both sides, as the
  # original's train_loop runs it off TPU (ours would take the CPU's
  # bfloat16 rewrite: item 11 measures that).
  use_bfloat16: false
}
""" + _SHAPES_INPUTS
ARCHS = {'ssd_mobilenet_v2': SSD_CONFIG, 'retinanet': RETINANET_CONFIG,
         'faster_rcnn': FASTER_RCNN_CONFIG, 'mask_rcnn': MASK_RCNN_CONFIG,
         'rfcn': RFCN_CONFIG, 'faster_rcnn_keras': FASTER_RCNN_KERAS_CONFIG,
         'efficientdet_d0': efficientdet.EFFICIENTDET_D0_CONFIG + _SHAPES_INPUTS}


def add_model_args(parser, size=300, depth=1.0, batch=8):
  """The flags every model benchmark takes."""
  parser.add_argument('--arch', choices=sorted(ARCHS),
                      default='ssd_mobilenet_v2')
  parser.add_argument('--size', type=int, default=size)
  parser.add_argument('--depth', type=float, default=depth)
  parser.add_argument('--batch', type=int, default=batch)
  parser.add_argument('--data_dir', required=True,
                      help='Written by write_records if empty.')
  parser.add_argument('--json', action='store_true',
                      help='End with a RESULT line for bench/run_all.py.')
  parser.add_argument('--bfloat16', action='store_true',
                      help='Our side as model_main --bfloat16: the session '
                           'runs the oneDNN bfloat16 rewrite where the CPU '
                           'has it (the ceilings and the original stay '
                           'float32).')
  parser.add_argument('--disable_thread_spinning', action='store_true',
                      help='Our side\'s session threads do not spin '
                           '(ConfigProto.experimental; same graph, same '
                           'numbers).')


def write_records(data_dir, size, num_train=64, num_val=32):
  """Synthetic shapes records of `size` pixels, unless already there."""
  if not os.path.exists(os.path.join(data_dir, 'shapes_label_map.pbtxt')):
    create_synthetic_tf_record.create_dataset(
        data_dir, num_train=num_train, num_val=num_val, image_size=size,
        num_train_shards=2, num_val_shards=1, seed=0)


def config_text(args):
  """args.arch's config at args' size, depth, batch and records."""
  return ARCHS[args.arch] % {'size': args.size, 'depth': args.depth,
                             'batch': args.batch, 'data': args.data_dir}


def ssd_config_path(args, directory, text=None):
  """Writes text (args.arch's config by default) into directory, with the
  records it reads; returns its path."""
  write_records(args.data_dir, args.size)
  path = os.path.join(directory, 'pipeline.config')
  with open(path, 'w') as f:
    f.write(config_text(args) if text is None else text)
  return path


def peak_rss_mb():
  """Peak resident memory of this process so far, in MiB."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class StepTimer(tf.compat.v1.train.SessionRunHook):
  """Times the steps after `warmup` steps of a MonitoredSession.

  seconds: wall time; cpu_seconds: the process's CPU time (all threads),
  which other work on a loaded machine disturbs less.
  """

  def __init__(self, warmup):
    self._warmup = warmup
    self._steps = 0
    self._start = None
    self.timed_steps = 0
    self.seconds = 0.0
    self.cpu_seconds = 0.0

  def after_run(self, run_context, run_values):
    self._steps += 1
    if self._steps == self._warmup:
      self._start = (time.perf_counter(), time.process_time())
    elif self._start is not None:
      self.timed_steps = self._steps - self._warmup
      self.seconds = time.perf_counter() - self._start[0]
      self.cpu_seconds = time.process_time() - self._start[1]


def quiet():
  """Less TensorFlow logging; benchmarks print their own lines."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)


def report(result, as_json):
  """Prints the result for a person, and as a RESULT line when asked."""
  for key, value in result.items():
    print('  %-28s %s' % (key, '%.3f' % value if isinstance(value, float)
                          else value))
  if as_json:
    print('RESULT ' + json.dumps(result))
