"""A TFLite SSD run like an export: export_tflite_ssd_graph's graph,
converted with its TFLite_Detection_PostProcess op.

Its input, normalized_input_image_tensor [1, height, width, 3], takes the
image resized to that size: as floats in [-1, 1] (the MobileNet SSDs'
preprocessing the graph leaves out), or as the uint8 pixels themselves in
a model quantized with the input stats (128, 128). The op's four outputs
are boxes, 0-based classes, scores and their count; `detect` returns them
as an export does (1-based float classes).
"""
import numpy as np
from PIL import Image
import tensorflow as tf

_POSTPROCESS = 'TFLite_Detection_PostProcess'
# The op's outputs, in order, under an export's keys.
_OUTPUTS = (('detection_boxes', _POSTPROCESS),
            ('detection_classes', _POSTPROCESS + ':1'),
            ('detection_scores', _POSTPROCESS + ':2'),
            ('num_detections', _POSTPROCESS + ':3'))


class TfliteDetector:
  """A .tflite SSD with its postprocessing op, one image per run."""

  input_type = 'image_tensor'
  has_masks = False

  def __init__(self, path, error_class):
    """Loads the model.

    Args:
      path: the .tflite file.
      error_class: the exception raised (one line) when it cannot be used.
    """
    try:
      with tf.io.gfile.GFile(path, 'rb') as f:
        self._interpreter = tf.lite.Interpreter(model_content=f.read())
      self._interpreter.allocate_tensors()
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
      raise error_class('cannot load the TFLite model %s: %s' % (
          path, str(error).splitlines()[0])) from None
    self._input = self._interpreter.get_input_details()[0]
    outputs = {detail['name']: detail['index']
               for detail in self._interpreter.get_output_details()}
    missing = [name for _, name in _OUTPUTS if name not in outputs]
    if missing:
      raise error_class(
          '%s has no %s output: convert export_tflite_ssd_graph\'s graph '
          'made with --add_postprocessing_op=true (raw outputs are not '
          'detections).' % (path, _POSTPROCESS))
    self._outputs = {key: outputs[name] for key, name in _OUTPUTS}

  def close(self):
    pass

  def detect(self, image, encoded, name, serialized=None):
    """Returns {output key: value of the single image} (see module)."""
    del encoded, name, serialized  # The pixels are fed.
    _, height, width, _ = self._input['shape']
    if image.shape[:2] != (height, width):
      image = np.array(Image.fromarray(image).resize((width, height),
                                                     Image.BILINEAR))
    if self._input['dtype'] == np.uint8:
      feed = image[np.newaxis]
    else:
      feed = (image[np.newaxis].astype(np.float32) * (2.0 / 255.0) - 1.0)
    self._interpreter.set_tensor(self._input['index'], feed)
    self._interpreter.invoke()
    values = {key: self._interpreter.get_tensor(index)[0]
              for key, index in self._outputs.items()}
    values['detection_classes'] = values['detection_classes'] + 1.0
    return values
