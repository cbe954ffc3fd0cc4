"""Exports an SSD model as a frozen graph ready for the TFLite converter.

The graph takes `normalized_input_image_tensor`, float32 [1, height, width,
channels] already normalized by the feature extractor's preprocessing (e.g.
[-1, 1) for the MobileNets), and holds:

  raw_outputs/box_encodings      [1, num_anchors, 4] box codes, not decoded.
  raw_outputs/class_predictions  [1, num_anchors, num_classes + 1] scores
                                 after the configured score conversion.
  anchors                        constant [num_anchors, 4] ycenter, xcenter,
                                 height, width.

With add_postprocessing_op a `TFLite_Detection_PostProcess` node (a custom op
the TFLite runtime ships) decodes the boxes and runs NMS; its four outputs are
detection boxes [1, max_detections, 4] (ymin, xmin, ymax, xmax), classes
[1, max_detections] (0-based), scores [1, max_detections] and the number of
detections [1]. The graph itself cannot run in TensorFlow then, only after
conversion with allow_custom_ops.

With a graph_rewriter (quantization-aware training) the graph is rewritten
for evaluation before freezing: batch norms folded, FakeQuant ops holding
the learned ranges, from which the converter makes a uint8 model.
"""
import os

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import types_pb2

from od_estimator import errors
from od_estimator.export import exporter
from od_estimator.export import nn_resize_rewrite
from od_estimator.builders import graph_rewriter_builder
from od_estimator.builders import model_builder
from od_estimator.builders import post_processing_builder
from od_estimator.core import box_list
from od_estimator.protos import pipeline_pb2
from od_estimator.utils import file_safety
from od_estimator.utils import graph_building

_INPUT_NAME = 'normalized_input_image_tensor'
_BOX_ENCODINGS = 'raw_outputs/box_encodings'
_CLASS_PREDICTIONS = 'raw_outputs/class_predictions'
_ANCHORS = 'anchors'
_POSTPROCESS_OP = 'TFLite_Detection_PostProcess'


def get_const_center_size_encoded_anchors(anchors):
  """Evaluates anchors into a constant named `anchors`.

  The postprocessing op decodes box codes against center-size anchors, so
  they are stored in that form.

  Args:
    anchors: [num_anchors, 4] float32 ymin, xmin, ymax, xmax tensor of the
      default graph, computable without feeding any placeholder.

  Returns:
    A [num_anchors, 4] float32 constant: ycenter, xcenter, height, width.
  """
  centers_and_sizes = box_list.BoxList(
      anchors).get_center_coordinates_and_sizes()
  with tf.compat.v1.Session() as sess:
    values = sess.run(centers_and_sizes)
  return tf.constant(np.stack(values, axis=1).astype(np.float32),
                     dtype=tf.float32, name=_ANCHORS)


def postprocessing_attrs(max_detections, max_classes_per_detection,
                         nms_score_threshold, nms_iou_threshold, num_classes,
                         scale_values, detections_per_class=100,
                         use_regular_nms=False):
  """{name: AttrValue} of the TFLite_Detection_PostProcess settings.

  Args:
    max_detections: number of boxes the op outputs.
    max_classes_per_detection: classes kept per box (fast NMS).
    nms_score_threshold: float, scores below it are dropped.
    nms_iou_threshold: float, IoU above which boxes are suppressed.
    num_classes: number of classes without background.
    scale_values: dict with float y_scale, x_scale, h_scale, w_scale of the
      faster_rcnn box coder.
    detections_per_class: boxes kept per class by regular NMS.
    use_regular_nms: per-class NMS instead of the faster class-agnostic one.
  """
  attrs = {
      'max_detections': attr_value_pb2.AttrValue(i=max_detections),
      'max_classes_per_detection': attr_value_pb2.AttrValue(
          i=max_classes_per_detection),
      'detections_per_class': attr_value_pb2.AttrValue(
          i=detections_per_class),
      'use_regular_nms': attr_value_pb2.AttrValue(b=use_regular_nms),
      'nms_score_threshold': attr_value_pb2.AttrValue(f=nms_score_threshold),
      'nms_iou_threshold': attr_value_pb2.AttrValue(f=nms_iou_threshold),
      'num_classes': attr_value_pb2.AttrValue(i=num_classes),
  }
  for key in ('y_scale', 'x_scale', 'h_scale', 'w_scale'):
    attrs[key] = attr_value_pb2.AttrValue(f=scale_values[key])
  return attrs


def config_postprocessing_settings(pipeline_config):
  """The op's settings the SSD config fixes: postprocessing_attrs kwargs.

  Its NMS thresholds, number of classes and box coder scales.
  """
  ssd = pipeline_config.model.ssd
  nms = ssd.post_processing.batch_non_max_suppression
  coder = ssd.box_coder.faster_rcnn_box_coder
  return {'nms_score_threshold': nms.score_threshold,
          'nms_iou_threshold': nms.iou_threshold,
          'num_classes': ssd.num_classes,
          'scale_values': {'y_scale': coder.y_scale, 'x_scale': coder.x_scale,
                           'h_scale': coder.height_scale,
                           'w_scale': coder.width_scale}}


def append_postprocessing_op(frozen_graph_def, max_detections,
                             max_classes_per_detection, nms_score_threshold,
                             nms_iou_threshold, num_classes, scale_values,
                             detections_per_class=100, use_regular_nms=False):
  """Adds the TFLite_Detection_PostProcess custom op node.

  Args:
    frozen_graph_def: frozen GraphDef holding raw_outputs/box_encodings,
      raw_outputs/class_predictions and anchors.
    max_detections, max_classes_per_detection, nms_score_threshold,
      nms_iou_threshold, num_classes, scale_values, detections_per_class,
      use_regular_nms: the op's settings, see postprocessing_attrs.

  Returns:
    A new GraphDef with the op node (named and typed like the original's)
    whose inputs are the three raw outputs. Every other node feeds it, so
    nothing needs stripping.
  """
  graph_def = tf.compat.v1.GraphDef()
  graph_def.CopyFrom(frozen_graph_def)
  node = graph_def.node.add()
  node.op = _POSTPROCESS_OP
  node.name = _POSTPROCESS_OP
  node.input.extend([_BOX_ENCODINGS, _CLASS_PREDICTIONS, _ANCHORS])
  attrs = postprocessing_attrs(
      max_detections, max_classes_per_detection, nms_score_threshold,
      nms_iou_threshold, num_classes, scale_values, detections_per_class,
      use_regular_nms)
  attrs.update({
      # Lets a quantized model still output float boxes and scores.
      '_output_quantized': attr_value_pb2.AttrValue(b=True),
      '_support_output_type_float_in_quantized_op':
          attr_value_pb2.AttrValue(b=True),
      '_output_types': attr_value_pb2.AttrValue(
          list=attr_value_pb2.AttrValue.ListValue(
              type=[types_pb2.DT_FLOAT] * 4)),
  })
  for key, value in attrs.items():
    node.attr[key].CopyFrom(value)
  return graph_def


def check_config(pipeline_config):
  """Returns the input shape, or raises UserInputError naming the field."""
  if not isinstance(pipeline_config, pipeline_pb2.TrainEvalPipelineConfig):
    raise ValueError('pipeline_config must be a TrainEvalPipelineConfig, got '
                     '%s.' % type(pipeline_config).__name__)
  meta_architecture = pipeline_config.model.WhichOneof('model')
  if meta_architecture != 'ssd':
    raise errors.UserInputError(
        'Only ssd models are supported in tflite. Found %s in '
        'config (model).' % meta_architecture)
  ssd = pipeline_config.model.ssd
  box_coder = ssd.box_coder.WhichOneof('box_coder_oneof')
  if box_coder != 'faster_rcnn_box_coder':
    raise errors.UserInputError(
        'model.ssd.box_coder: the TFLite postprocessing op '
        'decodes faster_rcnn_box_coder codes only, found %s.' %
        box_coder)
  resizer = ssd.image_resizer.WhichOneof('image_resizer_oneof')
  if resizer == 'fixed_shape_resizer':
    fixed = ssd.image_resizer.fixed_shape_resizer
    channels = 1 if fixed.convert_to_grayscale else 3
    return [1, fixed.height, fixed.width, channels]
  # Beyond the original (fixed_shape_resizer only): a resizer padding every
  # image to max_dimension square (EfficientDet's) has a fixed input too;
  # the app resizes and pads its images as that resizer does.
  keep = ssd.image_resizer.keep_aspect_ratio_resizer
  if resizer == 'keep_aspect_ratio_resizer' and keep.pad_to_max_dimension:
    channels = 1 if keep.convert_to_grayscale else 3
    return [1, keep.max_dimension, keep.max_dimension, channels]
  raise errors.UserInputError(
      'model.ssd.image_resizer: tflite needs a fixed input size: '
      'fixed_shape_resizer, or keep_aspect_ratio_resizer with '
      'pad_to_max_dimension: true; found %s.' % resizer)


@graph_building.identity_equality()
def _build_raw_outputs(pipeline_config, input_shape):
  """Builds placeholder -> predict -> named raw outputs in the default graph."""
  image = tf.compat.v1.placeholder(tf.float32, shape=input_shape,
                                   name=_INPUT_NAME)
  detection_model = model_builder.build(pipeline_config.model,
                                        is_training=False,
                                        add_summaries=False)
  # The input is already normalized, so preprocess() is skipped.
  predictions = detection_model.predict(image, true_image_shapes=None)
  # The custom op expects converted scores (background column included).
  _, score_conversion_fn = post_processing_builder.build(
      pipeline_config.model.ssd.post_processing)
  class_predictions = score_conversion_fn(
      predictions['class_predictions_with_background'])
  with tf.name_scope('raw_outputs'):
    tf.identity(predictions['box_encodings'], name='box_encodings')
    tf.identity(class_predictions, name='class_predictions')
  get_const_center_size_encoded_anchors(predictions['anchors'])
  # Restored with the weights so the graph records the trained step.
  tf.compat.v1.train.get_or_create_global_step()
  # As the original: the evaluation rewrite (folded batch norms, FakeQuant
  # ops with the learned ranges), then FPN upsamplings as one TFLite op.
  is_quantized = pipeline_config.HasField('graph_rewriter')
  if is_quantized:
    graph_rewriter_builder.build(pipeline_config.graph_rewriter,
                                 is_training=False)()
  if pipeline_config.model.ssd.feature_extractor.HasField('fpn'):
    nn_resize_rewrite.rewrite_nn_resize_op(is_quantized)


def export_tflite_graph(pipeline_config, trained_checkpoint_prefix,
                        output_dir, add_postprocessing_op, max_detections,
                        max_classes_per_detection, detections_per_class=100,
                        use_regular_nms=False,
                        binary_graph_name='tflite_graph.pb',
                        txt_graph_name='tflite_graph.pbtxt'):
  """Writes the TFLite-ready frozen graph of an SSD model.

  Args:
    pipeline_config: pipeline_pb2.TrainEvalPipelineConfig of an SSD model
      with a fixed_shape_resizer and a faster_rcnn_box_coder.
    trained_checkpoint_prefix: checkpoint prefix (path/model.ckpt-N), or a
      directory whose latest checkpoint is used.
    output_dir: directory for the graph files (created if needed). Graph
      files already there are replaced, as the original did, but only once
      both new ones are complete (links are replaced, never followed).
    add_postprocessing_op: append the TFLite_Detection_PostProcess node.
    max_detections: boxes output by the postprocessing op.
    max_classes_per_detection: classes per box in fast NMS.
    detections_per_class: boxes per class in regular NMS.
    use_regular_nms: use regular (per-class) instead of fast NMS.
    binary_graph_name: file name of the binary GraphDef.
    txt_graph_name: file name of the text GraphDef.

  Raises:
    ValueError: for a non-SSD model, another resizer or box coder, an
      unsupported graph_rewriter, a missing or mismatched checkpoint, or an
      output_dir that is a file.
  """
  input_shape = check_config(pipeline_config)
  checkpoint = exporter.resolve_checkpoint(trained_checkpoint_prefix,
                                          pipeline_config)
  with file_safety.staged_outputs(output_dir,
                                  [binary_graph_name, txt_graph_name], True,
                                  '--output_directory') as staging:
    graph_def = _tflite_graph_def(
        pipeline_config, input_shape, checkpoint, add_postprocessing_op,
        max_detections, max_classes_per_detection, detections_per_class,
        use_regular_nms)
    file_safety.write_file(os.path.join(staging, binary_graph_name),
                           graph_def.SerializeToString())
    file_safety.write_file(os.path.join(staging, txt_graph_name),
                           str(graph_def))
  logging.info('Wrote the tflite graph of %s to %s', checkpoint, output_dir)


def frozen_raw_outputs(pipeline_config, input_shape, checkpoint):
  """The frozen graph of the raw outputs (no postprocessing op).

  The weights (the averages with eval_config.use_moving_averages) are
  restored and frozen in one session (exporter.restore_and_freeze).

  Args:
    pipeline_config: the SSD config, checked by check_config.
    input_shape: what check_config returned.
    checkpoint: checkpoint prefix (TF1 name-based or TF2 object-based).

  Returns:
    GraphDef from `normalized_input_image_tensor` to
    raw_outputs/box_encodings, raw_outputs/class_predictions and anchors.
  """
  with tf.Graph().as_default() as graph:
    _build_raw_outputs(pipeline_config, input_shape)
    _, frozen_graph_def = exporter.restore_and_freeze(
        graph, exporter.uses_moving_averages(pipeline_config), checkpoint,
        [_BOX_ENCODINGS, _CLASS_PREDICTIONS, _ANCHORS],
        save_fn=lambda unused_session: None)
    return frozen_graph_def


def _tflite_graph_def(pipeline_config, input_shape, checkpoint,
                      add_postprocessing_op, max_detections,
                      max_classes_per_detection, detections_per_class,
                      use_regular_nms):
  """The frozen graph of export_tflite_graph (see its arguments)."""
  graph_def = frozen_raw_outputs(pipeline_config, input_shape, checkpoint)
  if not add_postprocessing_op:
    return graph_def
  return append_postprocessing_op(
      graph_def, max_detections, max_classes_per_detection,
      detections_per_class=detections_per_class,
      use_regular_nms=use_regular_nms,
      **config_postprocessing_settings(pipeline_config))
