"""Running TFLite models in tests and comparing their detections."""
import numpy as np
import tensorflow as tf

INPUT = 'normalized_input_image_tensor'
POSTPROCESS = 'TFLite_Detection_PostProcess'
POSTPROCESS_OUTPUTS = [POSTPROCESS] + [POSTPROCESS + ':%d' % i
                                       for i in (1, 2, 3)]
_BIAS_STDDEV = 0.1  # of the random biases
_PREDICTOR_SCALE = 0.25  # of the box and class predictors' random weights


def spread_out_weights():
  """Ops giving the convolutions He-scaled random weights.

  The config's initializer (stddev 0.03) makes the activations vanish over
  the tiny backbone's layers, leaving every anchor of a layer with the same
  score; variance-preserving weights give distinct scores and boxes.
  """
  rng = np.random.RandomState(0)
  ops = []
  for var in tf.compat.v1.trainable_variables():
    shape = var.shape.as_list()
    # Slim names (weights, biases) and Keras ones (kernel, bias).
    if var.op.name.endswith(('depthwise_weights', 'depthwise_kernel')):
      fan_in = shape[0] * shape[1]
    elif var.op.name.endswith(('weights', 'kernel')):
      fan_in = int(np.prod(shape[:-1]))
    elif var.op.name.endswith(('biases', 'bias')):
      ops.append(var.assign(rng.normal(0.0, _BIAS_STDDEV, shape)))
      continue
    else:
      continue
    stddev = np.sqrt(2.0 / fan_in)
    if 'Predictor/' in var.op.name:
      # Keeps logits and box codes moderate: unsaturated, distinct scores.
      stddev *= _PREDICTOR_SCALE
    ops.append(var.assign(rng.normal(0.0, stddev, shape)))
  return ops


def convert_float(graph_path, output_arrays, size):
  """The float TFLite model (bytes) of a size x size frozen tflite graph."""
  converter = tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(
      graph_path, input_arrays=[INPUT], output_arrays=output_arrays,
      input_shapes={INPUT: [1, size, size, 3]})
  converter.allow_custom_ops = True
  return converter.convert()


def run_model(model, image):
  """Runs a TFLite model (bytes) on a float image; returns name -> array.

  A uint8 input gets the image quantized with the input's scale and zero
  point.
  """
  interpreter = tf.lite.Interpreter(model_content=model)
  interpreter.allocate_tensors()
  detail = interpreter.get_input_details()[0]
  if detail['dtype'] == np.uint8:
    scale, zero_point = detail['quantization']
    image = np.clip(np.round(image / scale + zero_point), 0, 255).astype(
        np.uint8)
  interpreter.set_tensor(detail['index'], image)
  interpreter.invoke()
  return {detail['name']: interpreter.get_tensor(detail['index'])
          for detail in interpreter.get_output_details()}


def conv_dtypes(interpreter):
  """{'weights': dtypes, 'outputs': dtypes} of a model's convolutions."""
  tensors = {t['index']: t['dtype'] for t in interpreter.get_tensor_details()}
  ops = interpreter._get_ops_details()  # pylint: disable=protected-access
  convs = [op for op in ops if op['op_name'] in ('CONV_2D',
                                                 'DEPTHWISE_CONV_2D')]
  assert convs
  return {'weights': {tensors[op['inputs'][1]] for op in convs},
          'outputs': {tensors[op['outputs'][0]] for op in convs}}


def detections(outputs):
  """(boxes [n, 4], classes [n] int, scores [n]) of the postprocessing op."""
  count = int(outputs[POSTPROCESS + ':3'][0])
  return (outputs[POSTPROCESS][0, :count],
          outputs[POSTPROCESS + ':1'][0, :count].astype(int),
          outputs[POSTPROCESS + ':2'][0, :count])


def unmatched(candidate, reference, top, atol):
  """The candidate's top detections with no reference detection alike.

  Alike: same class, box and score within atol. Near-equal scores may
  swap ranks between the two, so each detection is looked up among all of
  the reference's rather than at its own rank.

  Args:
    candidate, reference: (boxes, classes, scores) as detections() returns.
    top: number of the candidate's best detections checked.
    atol: tolerance on box coordinates and scores.

  Returns:
    A list of (box, class, score) of the candidate without a match.
  """
  boxes, classes, scores = reference
  missing = []
  for box, label, score in list(zip(*candidate))[:top]:
    alike = ((classes == label) & (np.abs(scores - score) <= atol) &
             (np.abs(boxes - box).max(axis=1) <= atol))
    if not alike.any():
      missing.append((box, label, score))
  return missing
