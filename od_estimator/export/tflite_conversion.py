"""Converts export_tflite_ssd_graph's frozen graph into a `.tflite` model
(and export_tflite_graph_tf2's SavedModel: convert_saved_model, float).

Three kinds of model, chosen by the pipeline config and one flag:

  float            a float model: a float32 `.tflite`.
  uint8            a quantization-aware model (a `graph_rewriter` block):
                   the graph's fake-quant ranges make a fully quantized
                   uint8 model whose input is uint8 pixels with mean 128
                   and std 128 (the original's documented converter
                   command).
  post-training    a float model calibrated on a representative dataset
                   drawn from the config's eval TFRecords: full-integer
                   (uint8 input, int8 inside); the TFLite_Detection_PostProcess
                   custom op stays float, fed by dequantized raw outputs.

Every kind keeps TFLite_Detection_PostProcess as a custom op
(allow_custom_ops), which the TFLite runtime ships.
"""
import itertools
import os

from absl import logging
import tensorflow as tf

from od_estimator import errors
from od_estimator.input_pipeline import inputs
from od_estimator.core import standard_fields as fields
from od_estimator.utils import file_safety
from od_estimator.utils import label_map_util

TFLITE_NAME = 'detect.tflite'  # the original's documented output file
INPUT_NAME = 'normalized_input_image_tensor'
POSTPROCESS_OP = 'TFLite_Detection_PostProcess'
RAW_OUTPUTS = ('raw_outputs/box_encodings', 'raw_outputs/class_predictions')
# mean and std of the uint8 input, as the original's documented command: the
# model sees (pixel - 128) / 128, within 1/128 of the MobileNets' training
# preprocessing (2 / 255) * pixel - 1, which every quantized config uses.
QUANTIZED_INPUT_STATS = (128.0, 128.0)
# Where the calibration images come from, for the errors about them.
_CALIBRATION_INPUT = '--post_training_quantize: eval_input_reader[0]'


def is_quantization_aware(pipeline_config):
  """Whether the config has a graph_rewriter (it always quantizes)."""
  return pipeline_config.HasField('graph_rewriter')


def output_arrays(add_postprocessing_op):
  """The output tensor names of the exported graph."""
  if add_postprocessing_op:
    return [POSTPROCESS_OP] + ['%s:%d' % (POSTPROCESS_OP, i)
                               for i in (1, 2, 3)]
  return list(RAW_OUTPUTS)


def input_shape(pipeline_config):
  """[1, height, width, channels] of the exported graph's input."""
  fixed = pipeline_config.model.ssd.image_resizer.fixed_shape_resizer
  return [1, fixed.height, fixed.width,
          1 if fixed.convert_to_grayscale else 3]


def check_options(pipeline_config, post_training_quantize,
                  representative_examples):
  """Raises UserInputError for conversion options the config cannot take.

  With post_training_quantize, a LabelMapError too when the label map of
  the calibration images cannot be read.
  """
  if not post_training_quantize:
    return
  if is_quantization_aware(pipeline_config):
    raise errors.UserInputError(
        '--post_training_quantize is for float models: this config has a '
        'graph_rewriter quantization block, whose --convert output is '
        'already a fully quantized uint8 model.')
  if representative_examples < 1:
    raise errors.UserInputError(
        '--representative_examples must be positive, got %d.' %
        representative_examples)
  if not pipeline_config.eval_input_reader:
    raise errors.UserInputError(
        'post-training quantization draws its representative images from '
        'eval_input_reader, which the config lacks.')
  _check_label_map(pipeline_config.eval_input_reader[0])


def _check_label_map(eval_input_config):
  """Raises LabelMapError naming the flag and field of a bad label map.

  Read before the export, not once the graph is written.
  """
  path = eval_input_config.label_map_path
  if not path:
    return
  try:
    label_map_util.load_labelmap(path)
  except label_map_util.LabelMapError as error:
    raise label_map_util.LabelMapError('%s.label_map_path: %s' % (
        _CALIBRATION_INPUT, error)) from None


def representative_dataset(pipeline_config, num_examples):
  """Returns a generator fn of [normalized image] lists for calibration.

  The images are the first `num_examples` of the config's first
  eval_input_reader, read and preprocessed (resized and normalized) by the
  evaluation input pipeline, i.e. as the model saw them in evaluation.

  Args:
    pipeline_config: pipeline_pb2.TrainEvalPipelineConfig.
    num_examples: positive number of images.

  Raises:
    UserInputError: see check_options; eval_input_reader cannot be read or
      reads no image.
  """
  check_options(pipeline_config, True, num_examples)
  try:
    images = _read_images(pipeline_config, num_examples)
  except errors.UserInputError as error:
    raise errors.UserInputError('%s: %s' % (_CALIBRATION_INPUT,
                                            error)) from None
  if not images:
    raise errors.UserInputError('%s: no image read for the representative '
                                'dataset.' % _CALIBRATION_INPUT)
  logging.info('Calibrating on %d images of eval_input_reader.', len(images))

  def generate():
    for image in images:
      yield [image]
  return generate


def _read_images(pipeline_config, num_examples):
  """The first images of the eval input pipeline, each [1, h, w, c]."""
  eval_input_config = pipeline_config.eval_input_reader[0]
  with tf.Graph().as_default():
    dataset = inputs.eval_input(
        pipeline_config.eval_config, eval_input_config,
        pipeline_config.model, params={'batch_size': 1})
    features, _ = tf.compat.v1.data.make_one_shot_iterator(
        dataset.take(num_examples)).get_next()
    image = features[fields.InputDataFields.image]
    images = []
    with tf.compat.v1.Session() as sess:
      for _ in itertools.count():
        try:
          images.append(sess.run(image))
        except tf.errors.OutOfRangeError:
          break
  return images


def convert(graph_path, pipeline_config, add_postprocessing_op=True,
            post_training_quantize=False, representative_examples=100):
  """Returns the `.tflite` flatbuffer (bytes) of an exported tflite graph.

  Args:
    graph_path: tflite_graph.pb written by export_tflite_ssd_graph.
    pipeline_config: the pipeline config it was exported from.
    add_postprocessing_op: whether the graph holds the postprocessing op.
    post_training_quantize: calibrate a float model into a full-integer one.
    representative_examples: eval images used to calibrate.

  Raises:
    UserInputError: see check_options.
  """
  check_options(pipeline_config, post_training_quantize,
                representative_examples)
  quantized = is_quantization_aware(pipeline_config)
  shape = input_shape(pipeline_config)
  converter = tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(
      graph_path, input_arrays=[INPUT_NAME],
      output_arrays=output_arrays(add_postprocessing_op),
      input_shapes={INPUT_NAME: shape})
  converter.allow_custom_ops = True
  if quantized:
    converter.inference_type = tf.uint8
    converter.quantized_input_stats = {INPUT_NAME: QUANTIZED_INPUT_STATS}
  elif post_training_quantize:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative_dataset(
        pipeline_config, representative_examples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.uint8
  return converter.convert()


def convert_saved_model(saved_model_dir):
  """The float `.tflite` (bytes) of export_tflite_graph_tf2's SavedModel.

  The original's TF2 recipe: TFLite builtins, the postprocessing function
  legalized into the TFLite_Detection_PostProcess custom op.
  """
  converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  converter.allow_custom_ops = True
  return converter.convert()


def write_tflite(output_dir, pipeline_config, add_postprocessing_op=True,
                 post_training_quantize=False, representative_examples=100,
                 graph_name='tflite_graph.pb', tflite_name=TFLITE_NAME):
  """Converts output_dir/graph_name into output_dir/tflite_name.

  Returns:
    The path of the written `.tflite` file.
  """
  model = convert(os.path.join(output_dir, graph_name), pipeline_config,
                  add_postprocessing_op, post_training_quantize,
                  representative_examples)
  path = os.path.join(output_dir, tflite_name)
  file_safety.write_file(path, model)
  logging.info('Wrote %s (%d bytes).', path, len(model))
  return path
