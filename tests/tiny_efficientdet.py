"""A tiny EfficientDet derived from the original's D0 sample config.

ssd_efficientdet_d0_512x512_coco17_tpu-8 as it is (EfficientNet-B0 and a
BiFPN, the weight-shared depthwise box predictor with per-level batch norm,
SWISH, force_use_bias, multiscale anchors, focal loss, the D0 box coder
and post-processing), made small: the backbone at width x0.25, 64x64
images, levels 3..6, 2 BiFPN iterations of 16 filters, one tower layer of
16 in the predictor, one square anchor per cell, 3 classes, batch 2.

write_overfit_config points it at tests/tiny_faster_rcnn.py's overfitting
set (two 64x64 images of one 32-pixel shape each, which evaluation reads
too) with a recipe that overfits it in a few dozen steps from scratch
(mAP@.5 0.6 at 40 steps, 0.67 at 80, measured with seed 1): Adam, no
augmentation, batch norm training as in D0. Evaluation normalizes with the
moving averages, which must hold the training batches' statistics after
so few steps: the model starts from write_calibrated_checkpoint's weights,
whose moving statistics are those of the set's images; the backbone stays
at those weights (its batch statistics stay the calibrated ones; its batch
norm decay is EfficientNet's 0.99), and the BiFPN's and the predictor's
batch norms average fast (decay 0.5). The batch norms frozen
(freeze_batchnorm) train far slower: mAP@.5 0.04 after 80 steps.
"""
import os

import numpy as np
import tensorflow as tf

from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.dataset_tools import create_synthetic_tf_record
from tests import fast_graphs
from tests import tiny_faster_rcnn
from tests import upstream_folder

D0 = 'ssd_efficientdet_d0_512x512_coco17_tpu-8'
SIZE = 64
EXTRACTOR = 'ssd_efficientnet-b0_bifpn_keras'
# D0 made small (merged into the sample config).
TINY = """model { ssd {
  num_classes: 3
  image_resizer { keep_aspect_ratio_resizer {
    min_dimension: 64 max_dimension: 64 } }
  anchor_generator { multiscale_anchor_generator {
    max_level: 6 aspect_ratios: [1.0] scales_per_octave: 1 } }
  box_predictor { weight_shared_convolutional_box_predictor {
    depth: 16 num_layers_before_predictor: 1 } }
  feature_extractor { depth_multiplier: 0.25 bifpn {
    max_level: 6 num_iterations: 2 num_filters: 16 } }
  post_processing { batch_non_max_suppression {
    max_detections_per_class: 10 max_total_detections: 10 } }
} }
train_config { batch_size: 2 use_bfloat16: false }"""
# The overfitting recipe.
OVERFIT = """model { ssd {
  box_predictor { weight_shared_convolutional_box_predictor {
    conv_hyperparams { batch_norm { decay: 0.5 } } } }
  feature_extractor { conv_hyperparams { batch_norm { decay: 0.5 } } }
} }
train_config {
  optimizer { adam_optimizer { learning_rate {
    constant_learning_rate { learning_rate: 0.005 } } } }
  update_trainable_variables: ['EfficientDet-D0/', 'BoxPredictor/']
}"""


def pipeline_config(text=''):
  """D0 with TINY and then `text` merged, without its fine-tuning
  checkpoint (a placeholder path) or data (placeholders too)."""
  config = config_util.read_pipeline_config(
      upstream_folder.config_path(D0, tf2=True), TINY + '\n' + text)
  train_config = config.train_config
  for field in ('fine_tune_checkpoint', 'fine_tune_checkpoint_type',
                'fine_tune_checkpoint_version', 'num_steps'):
    train_config.ClearField(field)
  for option in train_config.data_augmentation_options:
    if option.HasField('random_scale_crop_and_pad_to_square'):
      option.random_scale_crop_and_pad_to_square.output_size = SIZE
  return config


def write_calibrated_checkpoint(prefix, model_config, images):
  """Saves a fresh model whose batch norms' moving statistics are those of
  the images (each batch norm in training mode on them); its prefix.

  Args:
    prefix: the checkpoint prefix.
    model_config: model_pb2.DetectionModel.
    images: [batch, height, width, 3] uint8.
  """
  model_config = type(model_config).FromString(
      model_config.SerializeToString())
  model_config.ssd.freeze_batchnorm = False
  # The moving averages' updates must not run with the assignments.
  model_config.ssd.inplace_batchnorm_update = False
  with fast_graphs.new_graph() as graph:
    tf.compat.v1.set_random_seed(1)
    model = model_builder.build(model_config, is_training=True,
                                add_summaries=False)
    model.predict(*model.preprocess(tf.constant(images, tf.float32)))
    # The statistics of each batch norm's input (the fused op's own are
    # not what a moving average would hold in the force_use_bias layers).
    assignments = []
    for op, (mean, variance) in tiny_faster_rcnn.batch_norms(graph):
      moments = tf.nn.moments(op.inputs[0], [0, 1, 2])
      assignments += [mean.assign(moments[0]), variance.assign(moments[1])]
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(assignments)
      return tf.compat.v1.train.Saver().save(session, prefix)


def write_overfit_config(directory, data_dir):
  """The tiny D0 with OVERFIT on the overfitting set; its path.

  Args:
    directory: where pipeline.config goes.
    data_dir: where the TFRecord (training and evaluation's) and label
      map go.
  """
  config = pipeline_config(OVERFIT)
  config.train_config.ClearField('data_augmentation_options')
  os.makedirs(str(data_dir), exist_ok=True)
  label_map = os.path.join(str(data_dir), 'label_map.pbtxt')
  with open(label_map, 'w') as f:
    f.write(create_synthetic_tf_record.label_map_text())
  frames = tiny_faster_rcnn.overfit_frames(SIZE)
  record = tiny_faster_rcnn.write_overfit_examples(data_dir, frames)
  config.train_config.fine_tune_checkpoint = write_calibrated_checkpoint(
      os.path.join(str(directory), 'calibrated', 'model.ckpt'), config.model,
      np.stack([frame[0] for frame in frames]))
  config.train_config.fine_tune_checkpoint_type = 'full'
  for reader in (config.train_input_reader, config.eval_input_reader[0]):
    reader.label_map_path = label_map
    reader.tf_record_input_reader.input_path[:] = [record]
  config.eval_input_reader[0].num_readers = 1
  config_util.save_pipeline_config(config, str(directory))
  return os.path.join(str(directory), 'pipeline.config')
