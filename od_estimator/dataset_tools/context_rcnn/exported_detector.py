"""An exported detection SavedModel run on serialized tf.Examples.

The Context R-CNN data tools feed each record to a model exported with
`export_inference_graph --input_type tf_example`: its `serving_default`
signature takes one batch of serialized tf.Examples and returns
detection_boxes, detection_scores, num_detections (and detection_features
when the model was built with output_final_box_features). check_model_dir
reads that signature from saved_model.pb before any worker starts, so a
wrong directory or export fails in one line; ExportedDetector loads the
model into a TF1 session (thread-safe, so a worker's threads share it).
"""
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from od_estimator import errors

SIGNATURE = 'serving_default'
# What every tool reads; tools add their own (detection_features).
DETECTION_OUTPUTS = ('detection_boxes', 'detection_scores', 'num_detections')
# How our exporter (and the original's) names the input placeholder of the
# other input types: they take images, not tf.Examples.
_IMAGE_INPUTS = {'image_tensor', 'encoded_image_string_tensor'}
# Outputs the exporter serves only when the config asks for them.
_OUTPUT_SETTINGS = {
    'detection_features': 'model.faster_rcnn.output_final_box_features: '
                          'true',
    'cropped_rpn_box_features': 'model.faster_rcnn.'
                                'output_final_box_rpn_features: true',
}


def saved_model_dir(model_dir, flag):
  """model_dir, or the saved_model/ folder in it (an export directory, as
  `detect` accepts).

  Raises:
    errors.UserInputError: naming the flag, when neither holds a SavedModel.
  """
  for candidate in (model_dir, tf.io.gfile.join(model_dir, 'saved_model')):
    if tf.io.gfile.exists(tf.io.gfile.join(candidate, 'saved_model.pb')):
      return candidate
  raise errors.UserInputError(
      '%s %s: no SavedModel there (no saved_model.pb); give the saved_model/ '
      'folder of an export_inference_graph --input_type tf_example export.'
      % (flag, model_dir))


def _signature(model_dir, flag):
  """The serving signature of the SavedModel in model_dir."""
  saved_model = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(tf.io.gfile.join(model_dir, 'saved_model.pb'),
                         'rb') as f:
    saved_model.ParseFromString(f.read())
  for meta_graph in saved_model.meta_graphs:
    if SIGNATURE in meta_graph.signature_def:
      return meta_graph.signature_def[SIGNATURE]
  raise errors.UserInputError('%s %s: the SavedModel has no %r signature.' % (
      flag, model_dir, SIGNATURE))


def check_model_dir(model_dir, flag, outputs):
  """Checks that model_dir holds a detector fed serialized tf.Examples.

  Args:
    model_dir: the SavedModel directory (an export's saved_model/), or the
      export directory.
    flag: the command-line flag that named it, for messages.
    outputs: names of the signature outputs the tool reads.

  Returns:
    The SavedModel directory.

  Raises:
    errors.UserInputError: naming the flag and directory, when there is no
      SavedModel, its serving signature takes images or side inputs, or it
      lacks one of `outputs` (with the config setting that adds it).
  """
  model_dir = saved_model_dir(model_dir, flag)
  signature = _signature(model_dir, flag)
  inputs = dict(signature.inputs)
  if len(inputs) != 1:
    raise errors.UserInputError(
        '%s %s: the model takes inputs %s; these tools feed only serialized '
        'tf.Examples (export it without side inputs).' % (
            flag, model_dir, ', '.join(sorted(inputs))))
  (info,) = inputs.values()
  placeholder = info.name.split(':')[0]
  if info.dtype != tf.string.as_datatype_enum or placeholder in _IMAGE_INPUTS:
    raise errors.UserInputError(
        '%s %s: the model takes images (%s), not serialized tf.Examples: '
        'export it with export_inference_graph --input_type tf_example.' % (
            flag, model_dir, placeholder))
  missing = [name for name in outputs if name not in signature.outputs]
  if missing:
    settings = [_OUTPUT_SETTINGS[name] for name in missing
                if name in _OUTPUT_SETTINGS]
    raise errors.UserInputError(
        '%s %s: the model has no output %s (it serves %s)%s.' % (
            flag, model_dir, ', '.join(missing),
            ', '.join(sorted(signature.outputs)),
            '; export a model built with ' + ', '.join(settings)
            if settings else ''))
  return model_dir


class ExportedDetector:
  """A detection SavedModel loaded once, run on one serialized tf.Example.

  Attributes:
    model_dir: the SavedModel directory.
  """

  def __init__(self, model_dir, outputs, flag='--model_dir'):
    """Loads the model.

    Args:
      model_dir: the SavedModel directory, fed serialized tf.Examples.
      outputs: the signature outputs `run` returns.
      flag: the flag that named model_dir, for messages.

    Raises:
      errors.UserInputError: see check_model_dir.
    """
    model_dir = check_model_dir(model_dir, flag, outputs)
    self.model_dir = model_dir
    self._graph = tf.Graph()
    self._session = tf.compat.v1.Session(graph=self._graph)
    with self._graph.as_default():
      meta_graph = tf.compat.v1.saved_model.loader.load(
          self._session, [tf.compat.v1.saved_model.tag_constants.SERVING],
          model_dir)
    signature = meta_graph.signature_def[SIGNATURE]
    (info,) = signature.inputs.values()
    self._input = info.name
    self._outputs = {name: signature.outputs[name].name for name in outputs}

  def run(self, serialized_example):
    """{output name: numpy value with a batch dimension of 1}."""
    return self._session.run(self._outputs,
                             {self._input: [serialized_example]})
