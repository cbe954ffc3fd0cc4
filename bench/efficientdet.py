"""EfficientDet-D0 in the bench (items 1e and 10e): its config, its ceiling.

EFFICIENTDET_D0_CONFIG is the original's TF2
ssd_efficientdet_d0_512x512_coco17_tpu-8.config with nothing changed but
what a benchmark must set: the image size (keep_aspect_ratio_resizer and
random_scale_crop_and_pad_to_square, 512 as shipped in `make bench`), the
batch, the inputs (synthetic shapes records; the 90 classes are kept), no
fine-tune checkpoint (random weights, as every bench model), and
use_bfloat16 off: the original's train_loop clears it off TPU, and on our
side it would turn on the oneDNN bfloat16 rewrite, so both sides train in
float32.

efficientnet_body_loss is the ceiling's body (bench/train_step.py
--mode=ceiling --arch=efficientdet_d0): EfficientNet-B0 as the detector
runs it, the stem to stack_6/block_0 (the blocks giving levels 3-5) with
batch norm in training mode and drop-connect, through its forward and
backward and the config's momentum step; no BiFPN, box predictor, anchors,
targets or focal loss. This module imports no other bench module.
"""
import tensorflow as tf
import tf_slim as slim

from od_estimator.nets import efficientnet

# The original's config as shipped, but for the fields named above
# (%(size)d, %(batch)d, use_bfloat16: false); common.py adds the inputs.
EFFICIENTDET_D0_CONFIG = """
model { ssd {
  inplace_batchnorm_update: true
  freeze_batchnorm: false
  num_classes: 90
  add_background_class: false
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
    aspect_ratios: [1.0, 2.0, 0.5] scales_per_octave: 3 } }
  image_resizer { keep_aspect_ratio_resizer {
    min_dimension: %(size)d max_dimension: %(size)d
    pad_to_max_dimension: true } }
  box_predictor { weight_shared_convolutional_box_predictor {
    depth: 64 class_prediction_bias_init: -4.6
    conv_hyperparams {
      force_use_bias: true
      activation: SWISH
      regularizer { l2_regularizer { weight: 0.00004 } }
      initializer { random_normal_initializer { stddev: 0.01 mean: 0.0 } }
      batch_norm { scale: true decay: 0.99 epsilon: 0.001 } }
    num_layers_before_predictor: 3 kernel_size: 3 use_depthwise: true } }
  feature_extractor {
    type: 'ssd_efficientnet-b0_bifpn_keras'
    bifpn { min_level: 3 max_level: 7 num_iterations: 3 num_filters: 64 }
    conv_hyperparams {
      force_use_bias: true
      activation: SWISH
      regularizer { l2_regularizer { weight: 0.00004 } }
      initializer { truncated_normal_initializer { stddev: 0.03 mean: 0.0 } }
      batch_norm { scale: true, decay: 0.99, epsilon: 0.001 } } }
  loss {
    classification_loss { weighted_sigmoid_focal { alpha: 0.25 gamma: 1.5 } }
    localization_loss { weighted_smooth_l1 {} }
    classification_weight: 1.0 localization_weight: 1.0 }
  normalize_loss_by_num_matches: true
  normalize_loc_loss_by_codesize: true
  post_processing {
    batch_non_max_suppression {
      score_threshold: 1e-8 iou_threshold: 0.5
      max_detections_per_class: 100 max_total_detections: 100 }
    score_converter: SIGMOID }
} }
train_config {
  batch_size: %(batch)d
  sync_replicas: true
  startup_delay_steps: 0
  replicas_to_aggregate: 8
  use_bfloat16: false
  num_steps: 300000
  data_augmentation_options { random_horizontal_flip {} }
  data_augmentation_options { random_scale_crop_and_pad_to_square {
    output_size: %(size)d scale_min: 0.1 scale_max: 2.0 } }
  optimizer {
    momentum_optimizer: {
      learning_rate: { cosine_decay_learning_rate {
        learning_rate_base: 8e-2 total_steps: 300000
        warmup_learning_rate: .001 warmup_steps: 2500 } }
      momentum_optimizer_value: 0.9 }
    use_moving_average: false }
  max_number_of_boxes: 100
  unpad_groundtruth_tensors: false
}
"""

# The detector's last backbone block (level 5) in the D0 config.
_LAST_BLOCK = 'stack_6/block_0'


def efficientnet_body_loss(args, images):
  """Loss over EfficientNet-B0's level-5 block as D0 trains it; its
  optimizer (the config's momentum; the learning rate does not change the
  work)."""
  del args  # The batch and size are the images'.
  with slim.arg_scope(efficientnet.default_arg_scope()), \
      slim.arg_scope([slim.batch_norm], is_training=True):
    end_points = efficientnet.efficientnet(
        images, model_name='efficientnet-b0', last_block=_LAST_BLOCK,
        is_training=True)
  features = end_points[_LAST_BLOCK + '/output']
  return tf.reduce_mean(tf.square(features)), (
      tf.compat.v1.train.MomentumOptimizer(0.001, momentum=0.9))
