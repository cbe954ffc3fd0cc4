"""The exported graph's input placeholders, named as the original's.

`image_tensor` (uint8 [batch, height, width, 3]), `encoded_image_string_tensor`
(JPEG/PNG strings [batch]), `tf_example` (serialized tf.Examples [batch])
and `float_image_tensor` (float32 [batch, height, width, 3]), each
returning (placeholder, image batch), plus the side inputs of
--side_input_shapes/names/types.
"""
import functools

import tensorflow as tf

from od_estimator import errors
from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
from od_estimator.core import shape_utils


# --side_input_types names, as the original's.
_SIDE_INPUT_TYPES = {'float': tf.float32, 'int': tf.int32, 'string': tf.string}
# The spellings the original's exporter_main_v2 takes (it evaluates them as
# Python).
_SIDE_INPUT_TYPE_ALIASES = {'tf.float32': 'float', 'tf.int32': 'int',
                            'tf.string': 'string'}


def parse_side_inputs(side_input_shapes_string, side_input_names_string,
                      side_input_types_string):
  """Parses the --side_input_* flags.

  Args:
    side_input_shapes_string: shapes separated by `/`, each a comma list of
      ints with -1 for an unknown dimension, e.g. "1,2000,2057/1".
    side_input_names_string: comma list of names, e.g.
      "context_features,valid_context_size".
    side_input_types_string: comma list of `float`, `int` or `string`, e.g.
      "float,int" (or the original's TF2 spellings: tf.float32, tf.int32,
      tf.string).

  Returns:
    (shapes: list of lists of int or None, names: list of str, types: list
    of tf.DType).

  Raises:
    UserInputError: when one of the three is missing, a shape is not
      integers or a type is unknown.
  """
  for value, flag in ((side_input_shapes_string, 'side_input_shapes'),
                      (side_input_names_string, 'side_input_names'),
                      (side_input_types_string, 'side_input_types')):
    if not value:
      raise errors.UserInputError(
          '--%s is required with --use_side_inputs.' % flag)
  try:
    shapes = [_parse_shape(part)
              for part in side_input_shapes_string.split('/')]
  except ValueError:
    raise errors.UserInputError(
        '--side_input_shapes must be comma-separated integers (-1 for '
        'unknown) with `/` between inputs, e.g. 1,2000,2057/1; got %r.' %
        side_input_shapes_string) from None
  names = side_input_names_string.split(',')
  types = [_SIDE_INPUT_TYPE_ALIASES.get(t.strip(), t.strip())
           for t in side_input_types_string.split(',')]
  unknown = [t for t in types if t not in _SIDE_INPUT_TYPES]
  if unknown:
    raise errors.UserInputError(
        '--side_input_types: unknown type(s) %s; use float, int '
        'or string.' % ', '.join(unknown))
  return shapes, names, [_SIDE_INPUT_TYPES[t] for t in types]


def side_inputs_from_flags(flag_values):
  """(shapes, names, types) of the --side_input_* flags, or three Nones.

  Args:
    flag_values: absl FLAGS of an export command (use_side_inputs and the
      three side_input_* strings).
  """
  if not flag_values.use_side_inputs:
    return None, None, None
  return parse_side_inputs(flag_values.side_input_shapes,
                           flag_values.side_input_names,
                           flag_values.side_input_types)


def _parse_shape(text):
  """"1,-1,3" -> [1, None, 3]."""
  return [None if dim.strip() == '-1' else int(dim) for dim in text.split(',')]


def side_input_flags(specs):
  """The export flags of side inputs: [(name, shape, dtype)] -> str."""
  type_names = {dtype: name for name, dtype in _SIDE_INPUT_TYPES.items()}
  return ('--use_side_inputs --side_input_shapes=%s --side_input_names=%s '
          '--side_input_types=%s' % (
              '/'.join(','.join('-1' if dim is None else str(dim)
                                for dim in shape) for _, shape, _ in specs),
              ','.join(name for name, _, _ in specs),
              ','.join(type_names[dtype] for _, _, dtype in specs)))


def check_side_inputs(model_side_input_names, use_side_inputs,
                      side_input_shapes, side_input_names, side_input_types,
                      expected_specs=None):
  """Refuses side inputs the model does not take as they are given.

  Args:
    model_side_input_names: the names the model's predict() takes.
    use_side_inputs, side_input_shapes, side_input_names, side_input_types:
      as export_inference_graph takes them.
    expected_specs: optional [(name, shape, dtype)] the model takes (from
      the config); their flags are suggested, and types and ranks checked.

  Raises:
    UserInputError: side inputs missing, given to a model that takes none,
      of other names, counts, types or ranks than the model takes.
  """
  model_names = list(model_side_input_names)
  if model_names and not use_side_inputs:
    raise errors.UserInputError(
        'this model takes the side inputs %s (Context R-CNN\'s context '
        'features) besides the image; export with %s.' % (
            ', '.join(model_names),
            side_input_flags(expected_specs) if expected_specs else
            '--use_side_inputs --side_input_names=%s and their '
            '--side_input_shapes and --side_input_types' %
            ','.join(model_names)))
  if not use_side_inputs:
    return
  if not model_names:
    raise errors.UserInputError(
        '--use_side_inputs: this model takes no side inputs (only Context '
        'R-CNN, a faster_rcnn with context_config, does); export without '
        '--use_side_inputs and --side_input_shapes/names/types.')
  given = (side_input_shapes or [], side_input_names or [],
           side_input_types or [])
  if len(set(len(values) for values in given)) != 1:
    raise errors.UserInputError(
        '--side_input_shapes, --side_input_names and --side_input_types '
        'must describe as many side inputs; got %d shape(s), %d name(s), %d '
        'type(s).' % tuple(len(values) for values in given))
  if sorted(given[1]) != sorted(model_names):
    raise errors.UserInputError(
        '--side_input_names must be %s (the side inputs this model takes), '
        'got %s.' % (','.join(model_names), ','.join(given[1]) or 'none'))
  expected = {name: (shape, dtype)
              for name, shape, dtype in expected_specs or []}
  for shape, name, dtype in zip(*given):
    if name not in expected:
      continue
    spec_shape, spec_dtype = expected[name]
    if tf.as_dtype(dtype) != spec_dtype or len(shape) != len(spec_shape):
      raise errors.UserInputError(
          'side input %s is %s of rank %d (%s); got %s of shape %s.' % (
              name, spec_dtype.name, len(spec_shape),
              side_input_flags(expected_specs), tf.as_dtype(dtype).name,
              list(shape)))


def _resize_fn(input_shape):
  """Returns fn(image [H, W, 3]) resizing to input_shape[1:3], or None."""
  if input_shape is None:
    return None
  height, width = input_shape[1:3]
  if height is None or width is None:
    raise errors.UserInputError(
        'input_shape %s: height and width must be known (not '
        '-1) to resize decoded images.' % (list(input_shape),))
  return lambda image: tf.image.resize(image, [height, width])


def _image_placeholder(dtype, name, input_shape=None):
  """Images of `dtype` fed directly, [batch, height, width, 3] by default.

  Returns:
    (placeholder, images): the same tensor twice.
  """
  if input_shape is None:
    input_shape = (None, None, None, 3)
  images = tf.compat.v1.placeholder(dtype, shape=input_shape, name=name)
  return images, images


def _decoded_batch(strings, decode, input_shape):
  """Maps `decode` (string -> uint8 [H, W, 3]) over a batch of strings.

  Without input_shape every image of a batch must have the same size (they
  are stacked); with it each is resized to input_shape[1:3] (float32).
  """
  resize = _resize_fn(input_shape)
  if resize is None:
    fn, dtype = decode, tf.uint8
  else:
    fn, dtype = (lambda string: resize(decode(string))), tf.float32
  return shape_utils.static_or_dynamic_map_fn(
      fn, elems=strings, dtype=dtype, parallel_iterations=32,
      back_prop=False)


def _encoded_image_string_tensor_input_placeholder(input_shape=None):
  """A batch of encoded (JPEG, PNG, GIF, BMP) image strings.

  Returns:
    (placeholder string [None], decoded images [None, H, W, 3]).
  """
  strings = tf.compat.v1.placeholder(tf.string, shape=[None],
                                     name='encoded_image_string_tensor')

  def decode(encoded):
    image = tf.image.decode_image(encoded, channels=3,
                                  expand_animations=False)
    return tf.ensure_shape(image, [None, None, 3])
  return strings, _decoded_batch(strings, decode, input_shape)


def _tf_example_input_placeholder(input_shape=None):
  """A batch of serialized tf.Examples holding `image/encoded`.

  Returns:
    (placeholder string [None], decoded images [None, H, W, 3]).
  """
  strings = tf.compat.v1.placeholder(tf.string, shape=[None],
                                     name='tf_example')
  decoder = tf_example_decoder.TfExampleDecoder()

  def decode(serialized):
    return decoder.decode(serialized)[fields.InputDataFields.image]
  return strings, _decoded_batch(strings, decode, input_shape)


def side_input_tensor_placeholder(side_input_shape, side_input_name,
                                   side_input_type):
  """A side input fed as it is, named after it.

  Returns:
    (placeholder, side input tensor): the same tensor twice.
  """
  placeholder = tf.compat.v1.placeholder(
      side_input_type, shape=side_input_shape, name=side_input_name)
  return placeholder, placeholder


input_placeholder_fn_map = {
    'image_tensor': functools.partial(_image_placeholder, tf.uint8,
                                      'image_tensor'),
    'encoded_image_string_tensor':
        _encoded_image_string_tensor_input_placeholder,
    'tf_example': _tf_example_input_placeholder,
    # The TF2 exports' float input.
    'float_image_tensor': functools.partial(_image_placeholder, tf.float32,
                                            'float_image_tensor'),
}
