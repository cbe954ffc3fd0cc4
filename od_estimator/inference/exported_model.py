"""An exported detector run one image at a time: SavedModel or frozen graph.

`open_model(path)` takes what export_inference_graph (or exporter_main_v2)
wrote: the saved_model/ directory, the export directory above it, or its
frozen_inference_graph.pb; or a SavedModel model_main's Servo exporter
wrote (model_dir/export/Servo/<timestamp>/); or a `.tflite` SSD converted
from export_tflite_ssd_graph's graph (tflite_model). Each model's `detect`
returns the first (only) image's detection_boxes [N, 4] (normalized ymin,
xmin, ymax, xmax), detection_scores [N], detection_classes [N] (float,
1-based label map ids) and num_detections, whatever its --input_type
(image_tensor, encoded_image_string_tensor or tf_example).
"""
import io
import os

from google.protobuf import message
import numpy as np
from PIL import Image
import tensorflow as tf

from od_estimator import errors
from od_estimator.core import spatial_transform_ops
from od_estimator.inference import tflite_model

SIGNATURE = 'serving_default'
# The images' input: export_inference_graph's, exporter_main_v2's, and the
# scalar serialized tf.Example of the Servo export model_main writes.
_INPUT_KEYS = ('inputs', 'input_tensor', 'serialized_example')
# Ops that read serialized tf.Examples (a tf_example export parses them).
_PARSE_OPS = ('ParseExample', 'ParseExampleV2', 'ParseSingleExample')
OUTPUT_KEYS = ('detection_boxes', 'detection_scores', 'detection_classes',
               'num_detections')
MASKS_KEY = 'detection_masks'
_MASK_THRESHOLD = 0.5
# A frozen graph's input placeholder for each --input_type.
_FROZEN_INPUTS = ('image_tensor', 'encoded_image_string_tensor',
                  'tf_example')
_FROZEN_GRAPH = 'frozen_inference_graph.pb'
TFLITE_SUFFIX = '.tflite'


class ExportedModelError(errors.UserInputError):
  """A model, or an input, that stops the whole run; the message is one
  line."""


def resolve_saved_model_dir(path):
  """Accepts the saved_model/ directory or the export directory above it."""
  for candidate in (path, os.path.join(path, 'saved_model')):
    if (tf.io.gfile.exists(os.path.join(candidate, 'saved_model.pb')) or
        tf.io.gfile.exists(os.path.join(candidate, 'saved_model.pbtxt'))):
      return candidate
  if not tf.io.gfile.isdir(path):
    raise ExportedModelError('saved model directory not found: %s' % path)
  raise ExportedModelError(
      '%s holds no saved_model.pb; pass the saved_model/ directory written '
      'by export_inference_graph.' % path)


def open_model(path):
  """The detector exported at `path` (see the module docstring).

  Raises:
    ExportedModelError: nothing there, or neither a SavedModel, a frozen
      graph nor a TFLite model of a detector.
  """
  if tf.io.gfile.isdir(path):
    return SavedModelDetector(resolve_saved_model_dir(path))
  if not tf.io.gfile.exists(path):
    raise ExportedModelError('exported model not found: %s' % path)
  if path.endswith(TFLITE_SUFFIX):
    return tflite_model.TfliteDetector(path, ExportedModelError)
  return FrozenGraphDetector(path)


class _Detector:
  """What both kinds share: a TF1 session fed one image per run."""

  def __init__(self):
    self._graph = tf.Graph()
    self._sess = tf.compat.v1.Session(graph=self._graph)
    self._input = None
    self._outputs = {}
    self.input_type = 'image_tensor'
    self._fixed_size = None
    # A scalar input (one serialized tf.Example) instead of a batch of one.
    self._scalar_input = False
    self.has_masks = False

  def close(self):
    self._sess.close()

  def detect(self, image, encoded, name, serialized=None):
    """Returns {output key: value of the single image}.

    Args:
      image: the decoded image, uint8 [height, width, 3].
      encoded: the image file's bytes.
      name: the image file's name (a tf_example's filename and source_id).
      serialized: the image's serialized tf.Example, fed as it is to a
        tf_example model; None makes one from `encoded`.
    """
    if self.input_type == 'tf_example':
      feed = np.array([serialized or _tf_example(encoded, name)],
                      dtype=object)
    elif self.input_type == 'encoded_image_string_tensor':
      feed = np.array([encoded], dtype=object)
    else:
      if self._fixed_size and image.shape[1::-1] != self._fixed_size:
        # Boxes are normalized, so resizing does not move them.
        image = np.array(Image.fromarray(image).resize(self._fixed_size))
      feed = image[np.newaxis]
    if self._scalar_input:
      feed = feed[0]
    values = self._sess.run(self._outputs, feed_dict={self._input: feed})
    return {key: value[0] for key, value in values.items()}

  def _add_mask_paster(self, masks_tensor_name):
    self.has_masks = True
    self._outputs[MASKS_KEY] = masks_tensor_name
    with self._graph.as_default():
      self._paste = _MaskPaster()

  def image_masks(self, detections, height, width):
    """uint8 [N, height, width] 0/1 masks of the detections given."""
    return self._paste(self._sess, detections[MASKS_KEY],
                       detections['detection_boxes'], height, width)


class SavedModelDetector(_Detector):
  """A SavedModel's serving_default signature."""

  def __init__(self, saved_model_dir):
    super().__init__()
    try:
      meta_graph = tf.compat.v1.saved_model.loader.load(
          self._sess, [tf.compat.v1.saved_model.tag_constants.SERVING],
          saved_model_dir)
    except (OSError, RuntimeError, ValueError,
            tf.errors.OpError) as error:
      raise ExportedModelError('cannot load the saved model in %s: %s' % (
          saved_model_dir, str(error).splitlines()[0])) from None
    if SIGNATURE not in meta_graph.signature_def:
      raise ExportedModelError('%s has no %r signature.' % (saved_model_dir,
                                                            SIGNATURE))
    signature = meta_graph.signature_def[SIGNATURE]
    input_key = next((key for key in _INPUT_KEYS if key in signature.inputs),
                     None)
    if input_key is None:
      raise ExportedModelError('the %r signature of %s has no %s input.' % (
          SIGNATURE, saved_model_dir, ' or '.join(map(repr, _INPUT_KEYS))))
    missing = [key for key in OUTPUT_KEYS if key not in signature.outputs]
    if missing:
      raise ExportedModelError('the %r signature of %s lacks output(s) %s.' % (
          SIGNATURE, saved_model_dir, ', '.join(missing)))
    side_inputs = sorted(set(signature.inputs) - {input_key})
    if side_inputs:
      raise ExportedModelError(
          '%s takes the side inputs %s besides the images (a Context R-CNN '
          'export with --use_side_inputs); this command feeds images only: '
          'serve it with those inputs from your own code (its %r '
          'signature).' % (saved_model_dir, ', '.join(side_inputs),
                           SIGNATURE))
    info = signature.inputs[input_key]
    self._input = info.name
    self.input_type = _input_type(info, meta_graph.graph_def)
    dims = [d.size for d in info.tensor_shape.dim]
    self._scalar_input = not dims and not info.tensor_shape.unknown_rank
    if (self.input_type == 'image_tensor' and len(dims) == 4 and
        dims[1] > 0 and dims[2] > 0):
      self._fixed_size = (dims[2], dims[1])  # PIL order: width, height
    self._outputs = {key: signature.outputs[key].name for key in OUTPUT_KEYS}
    if MASKS_KEY in signature.outputs:
      self._add_mask_paster(signature.outputs[MASKS_KEY].name)


class FrozenGraphDetector(_Detector):
  """export_inference_graph's frozen_inference_graph.pb: the input
  placeholder of its --input_type and the `<output key>:0` tensors."""

  def __init__(self, path):
    super().__init__()
    graph_def = tf.compat.v1.GraphDef()
    try:
      with tf.io.gfile.GFile(path, 'rb') as f:
        graph_def.ParseFromString(f.read())
    except (message.DecodeError, tf.errors.OpError):
      graph_def = None
    nodes = {node.name: node for node in graph_def.node} if graph_def else {}
    input_type = next((name for name in _FROZEN_INPUTS if name in nodes),
                      None)
    missing = [key for key in OUTPUT_KEYS if key not in nodes]
    if input_type is None or missing:
      raise ExportedModelError(
          '%s is not an exported detector: pass a SavedModel directory (an '
          'export directory or its saved_model/) or the %s an export holds '
          '(%s).' % (path, _FROZEN_GRAPH, 'not a graph' if not nodes else
                     'no %s input' % ' or '.join(_FROZEN_INPUTS)
                     if input_type is None else
                     'no %s output' % ', '.join(missing)))
    with self._graph.as_default():
      tf.compat.v1.import_graph_def(graph_def, name='')
    self.input_type = input_type
    self._input = input_type + ':0'
    shape = nodes[input_type].attr['shape'].shape
    dims = [d.size for d in shape.dim]
    if (input_type == 'image_tensor' and len(dims) == 4 and dims[1] > 0 and
        dims[2] > 0):
      self._fixed_size = (dims[2], dims[1])
    self._outputs = {key: key + ':0' for key in OUTPUT_KEYS}
    if MASKS_KEY in nodes:
      self._add_mask_paster(MASKS_KEY + ':0')


class _MaskPaster:
  """Graph ops pasting one image's box-relative masks into the image."""

  def __init__(self):
    placeholder = tf.compat.v1.placeholder
    self._masks = placeholder(tf.float32, [None, None, None])
    self._boxes = placeholder(tf.float32, [None, 4])
    self._size = placeholder(tf.int32, [2])
    pasted = spatial_transform_ops.reframe_box_masks_to_image_masks(
        self._masks, self._boxes, self._size[0], self._size[1])
    self._pasted = tf.cast(tf.greater(pasted, _MASK_THRESHOLD), tf.uint8)

  def __call__(self, sess, masks, boxes, height, width):
    return sess.run(self._pasted, feed_dict={
        self._masks: masks, self._boxes: boxes,
        self._size: [height, width]})


def _input_type(info, graph_def):
  """The exporter's --input_type behind a signature input (its TensorInfo).

  image_tensor takes uint8 pixels; the two string inputs are told apart by
  export_inference_graph's placeholder names (tf_example,
  encoded_image_string_tensor); exporter_main_v2 names both `input_tensor`,
  and only its tf_example export parses tf.Examples (in the functions of
  graph_def, the loaded SavedModel's).
  """
  if info.dtype != tf.string.as_datatype_enum:
    return 'image_tensor'
  if info.name.split(':')[0].split('/')[-1] == 'tf_example':
    return 'tf_example'
  functions = graph_def.library.function
  if any(node.op in _PARSE_OPS for node in graph_def.node) or any(
      node.op in _PARSE_OPS for function in functions
      for node in function.node_def):
    return 'tf_example'
  return 'encoded_image_string_tensor'


def _tf_example(encoded, name):
  """A serialized tf.Example holding one image file, as the records do."""
  with Image.open(io.BytesIO(encoded)) as image:
    image_format = (image.format or 'jpeg').lower()
  feature = {
      'image/encoded': [encoded],
      'image/format': [image_format.encode('utf-8')],
      'image/filename': [name.encode('utf-8')],
      'image/source_id': [name.encode('utf-8')],
  }
  return tf.train.Example(features=tf.train.Features(feature={
      key: tf.train.Feature(bytes_list=tf.train.BytesList(value=value))
      for key, value in feature.items()})).SerializeToString()
