"""The intermediate SavedModel of the original's TF2 route to TFLite (SSD).

`export_tflite_model` writes `output_directory/saved_model/`, laid out and
signed as the original's `export_tflite_graph_tf2` writes it: one
`serving_default` signature whose input `input` is float32 [1, height,
width, channels], the fixed_shape_resizer's size, already normalized as the
feature extractor's preprocess does (pixel / 127.5 - 1 for the MobileNets),
and whose outputs are those of the `TFLite_Detection_PostProcess` op:

  output_0  num_detections  [1]
  output_1  scores          [1, max_detections]
  output_2  classes         [1, max_detections], 0-based, no background
  output_3  boxes           [1, max_detections, 4], ymin, xmin, ymax, xmax

The network is the frozen graph of the TF1 route (export_tflite_ssd_graph_lib:
the checkpoint's weights, or their moving averages, as constants). Its raw
outputs go through a function carrying the op's settings as
`experimental_implements`, which the TFLite converter replaces with the
custom op. Where the original's function returns zeros, ours computes in
TensorFlow what the op computes (decoded boxes, fast or regular NMS), so
the SavedModel also runs in TensorFlow and serves the converted model's
detections.
"""
import os

from absl import logging
from google.protobuf import text_format
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from od_estimator import errors
from od_estimator.box_coders import faster_rcnn_box_coder
from od_estimator.core import box_list
from od_estimator.export import export_tflite_ssd_graph_lib
from od_estimator.export import exporter
from od_estimator.export import exporter_v2
from od_estimator.export import tflite_conversion
from od_estimator.utils import file_safety

SAVED_MODEL = 'saved_model'
INPUT_NAME = 'input'  # the original's signature input
# The op's inputs in the frozen graph, in the op's order.
_RAW_OUTPUTS = ('raw_outputs/box_encodings:0',
                'raw_outputs/class_predictions:0', 'anchors:0')
# The original's TF2 route keeps one class per box in fast NMS.
_MAX_CLASSES_PER_DETECTION = 1
# Boxes per class in regular NMS: the op's default, as the converter (TF
# 2.15) passes no detections_per_class from the function's settings.
_DETECTIONS_PER_CLASS = 100


def check_supported(pipeline_config, include_keypoints=False,
                    label_map_path=None):
  """Returns the model's input shape; raises UserInputError if unsupported.

  Args:
    pipeline_config: pipeline_pb2.TrainEvalPipelineConfig.
    include_keypoints: the original's --centernet_include_keypoints.
    label_map_path: the original's --keypoint_label_map_path.
  """
  kind = pipeline_config.model.WhichOneof('model')
  centernet_flags = [flag for flag, value in (
      ('--centernet_include_keypoints', include_keypoints),
      ('--keypoint_label_map_path', label_map_path)) if value]
  if kind == 'center_net' or centernet_flags:
    raise errors.UserInputError(
        '%s: od_estimator has no CenterNet model; export_tflite_graph_tf2 '
        'exports ssd models (model.ssd) only.' % (
            ', '.join(centernet_flags) or 'model.center_net'))
  if pipeline_config.HasField('graph_rewriter'):
    raise errors.UserInputError(
        'graph_rewriter: the TF2 route writes float models, as the '
        "original's; export a quantization-aware model with "
        'export_tflite_ssd_graph --convert.')
  return export_tflite_ssd_graph_lib.check_config(pipeline_config)


def _implements(attrs):
  """The op's name and settings as experimental_implements reads them."""
  return text_format.MessageToString(attr_value_pb2.NameAttrList(
      name=tflite_conversion.POSTPROCESS_OP, attr=attrs), as_one_line=True)


def _decode(box_encodings, anchors, attrs):
  """[num_anchors, 4] corner boxes of the op's center-size anchors."""
  ycenter, xcenter, height, width = tf.unstack(anchors, axis=1)
  corners = box_list.BoxList(tf.stack([
      ycenter - height / 2, xcenter - width / 2, ycenter + height / 2,
      xcenter + width / 2], axis=1))
  coder = faster_rcnn_box_coder.FasterRcnnBoxCoder(
      [attrs[key].f for key in ('y_scale', 'x_scale', 'h_scale', 'w_scale')])
  return coder.decode(box_encodings[0], corners).get()


def _fast_nms(boxes, scores, attrs):
  """Class-agnostic NMS on each anchor's best class, padded to the size."""
  size = attrs['max_detections'].i
  best = tf.reduce_max(scores, axis=1)
  kept = tf.image.non_max_suppression(
      boxes, best, size, iou_threshold=attrs['nms_iou_threshold'].f,
      score_threshold=attrs['nms_score_threshold'].f)
  padding = size - tf.size(kept)

  def padded(values):
    rest = values.shape.as_list()[1:]
    return tf.reshape(tf.pad(values, [[0, padding]] + [[0, 0]] * len(rest)),
                      [1, size] + rest)
  classes = tf.cast(tf.argmax(scores, axis=1), tf.float32)
  return (padded(tf.gather(boxes, kept)), padded(tf.gather(classes, kept)),
          padded(tf.gather(best, kept)),
          tf.cast(tf.size(kept), tf.float32)[None])


def _regular_nms(boxes, scores, attrs):
  """Per-class NMS, then the best of all classes."""
  boxes, scores, classes, count = tf.image.combined_non_max_suppression(
      boxes[None, :, None], scores[None], _DETECTIONS_PER_CLASS,
      attrs['max_detections'].i, attrs['nms_iou_threshold'].f,
      attrs['nms_score_threshold'].f, clip_boxes=False)
  return boxes, classes, scores, tf.cast(count, tf.float32)


def postprocess_function(attrs):
  """The tf.function the converter replaces with TFLite_Detection_PostProcess.

  Args:
    attrs: the op's settings (export_tflite_ssd_graph_lib.postprocessing_attrs;
      detections_per_class is the op's default, whatever it says).

  Returns:
    fn(box_encodings [1, N, 4], class_predictions [1, N, classes + 1],
    anchors [N, 4] center-size) -> (boxes, classes, scores, num_detections)
    as the op outputs them.
  """
  nms = _regular_nms if attrs['use_regular_nms'].b else _fast_nms

  @tf.function(experimental_implements=_implements(attrs))
  def postprocess(box_encodings, class_predictions, anchors):
    boxes = _decode(box_encodings, anchors, attrs)
    return nms(boxes, class_predictions[0, :, 1:], attrs)
  return postprocess


class _TFLiteDetector(tf.Module):
  """The frozen network followed by the postprocessing function."""

  def __init__(self, frozen_graph_def, input_shape, attrs):
    super().__init__()
    self._network = exporter_v2.frozen_graph_function(
        frozen_graph_def, [tflite_conversion.INPUT_NAME + ':0'],
        list(_RAW_OUTPUTS))
    self._postprocess = postprocess_function(attrs)
    self.__call__ = tf.function(self._call, input_signature=[
        tf.TensorSpec(input_shape, tf.float32, name=INPUT_NAME)])

  def _call(self, image):
    # output_0 .. output_3, as the original: the op's outputs reversed.
    return self._postprocess(*self._network(image))[::-1]


def export_tflite_model(pipeline_config, trained_checkpoint_dir,
                        output_directory, max_detections, use_regular_nms,
                        include_keypoints=False, label_map_path=None,
                        overwrite=False, convert=False):
  """Writes output_directory/saved_model/ for the TFLite converter.

  Args:
    pipeline_config: pipeline_pb2.TrainEvalPipelineConfig of an SSD model
      with a fixed_shape_resizer and a faster_rcnn_box_coder (not modified).
    trained_checkpoint_dir: a directory, whose latest checkpoint (TF1
      `model.ckpt-N` or TF2 `ckpt-N`) is exported, or a checkpoint prefix.
    output_directory: created if needed.
    max_detections: boxes the op outputs.
    use_regular_nms: per-class NMS instead of the faster class-agnostic one.
    include_keypoints: the original's CenterNet option: refused if set.
    label_map_path: the original's CenterNet option: refused if set.
    overwrite: replace a saved_model/ (and detect.tflite) already there.
    convert: also write output_directory/detect.tflite (float).

  Raises:
    errors.UserInputError: an unsupported model or option, a missing or
      mismatched checkpoint, or (without `overwrite`) an earlier export.
  """
  input_shape = check_supported(pipeline_config, include_keypoints,
                                label_map_path)
  if max_detections < 1:
    raise errors.UserInputError('--max_detections must be positive, got %d.'
                                % max_detections)
  checkpoint = exporter.resolve_checkpoint(trained_checkpoint_dir,
                                          pipeline_config)
  attrs = export_tflite_ssd_graph_lib.postprocessing_attrs(
      max_detections, _MAX_CLASSES_PER_DETECTION,
      use_regular_nms=use_regular_nms,
      **export_tflite_ssd_graph_lib.config_postprocessing_settings(
          pipeline_config))
  del attrs['detections_per_class']  # The converter would drop it.
  outputs = [SAVED_MODEL] + [tflite_conversion.TFLITE_NAME] * convert
  with file_safety.staged_outputs(output_directory, outputs, overwrite,
                                  '--output_directory') as staging:
    frozen_graph_def = export_tflite_ssd_graph_lib.frozen_raw_outputs(
        pipeline_config, input_shape, checkpoint)
    detector = _TFLiteDetector(frozen_graph_def, input_shape, attrs)
    saved_model = os.path.join(staging, SAVED_MODEL)
    tf.saved_model.save(detector, saved_model,
                        signatures=detector.__call__.get_concrete_function())
    if convert:
      file_safety.write_file(
          os.path.join(staging, tflite_conversion.TFLITE_NAME),
          tflite_conversion.convert_saved_model(saved_model))
  logging.info('Exported %s for TFLite to %s', checkpoint, output_directory)
