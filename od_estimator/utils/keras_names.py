"""Keras variable names for models built from tf-slim layers.

The original's TF2 models (feature extractor types ending in `_keras`) name
their variables after Keras layers: `Conv1/kernel`, `bn_Conv1/gamma`,
`BoxPredictor/ConvolutionalBoxHead_0/BoxEncodingPredictor/bias`, where its
slim models say `Conv/weights`, `Conv/BatchNorm/gamma`,
`BoxPredictor_0/BoxEncodingPredictor/biases`. We build those models with
the same slim layers inside `renamed_variables`, which gives each variable
its Keras name as it is created, so checkpoints of either kind restore.
"""
import contextlib

import tensorflow as tf

# Slim variable name -> Keras weight name, for convolutions.
_CONV_VARIABLES = {
    'weights': 'kernel',
    'biases': 'bias',
    'depthwise_weights': 'depthwise_kernel',
    'pointwise_weights': 'pointwise_kernel',
}
# Named alike by slim.batch_norm and Keras BatchNormalization.
BATCH_NORM_VARIABLES = ('beta', 'gamma', 'moving_mean', 'moving_variance')
_SLIM_BATCH_NORM = '/BatchNorm'


def split_variable(name):
  """Splits a slim variable name into its layer and the Keras weight name.

  Args:
    name: e.g. 'Conv/weights' or 'Conv/BatchNorm/gamma'.

  Returns:
    (layer, weight): ('Conv', 'kernel') or ('Conv/BatchNorm', 'gamma').

  Raises:
    ValueError: if the name ends in no known convolution or batch norm
      variable.
  """
  layer, _, variable = name.rpartition('/')
  if variable in _CONV_VARIABLES:
    return layer, _CONV_VARIABLES[variable]
  if variable in BATCH_NORM_VARIABLES:
    return layer, variable
  raise ValueError('No Keras name for variable %r: expected a convolution '
                   '(%s) or batch norm (%s) variable.' % (
                       name, ', '.join(_CONV_VARIABLES),
                       ', '.join(BATCH_NORM_VARIABLES)))


def keras_layer_variable(name, conv_suffix='', batch_norm_suffix='_bn'):
  """Keras name of a slim conv (+ batch norm) layer's variable.

  Keras gives the batch norm its own layer next to the convolution:
  `<layer>/weights` becomes `<layer><conv_suffix>/kernel` and
  `<layer>/BatchNorm/<v>` becomes `<layer><batch_norm_suffix>/<v>`.

  Args:
    name: slim variable name relative to the layer's parent scope.
    conv_suffix: appended to the convolution layer's name.
    batch_norm_suffix: appended to the layer's name for its batch norm.

  Returns:
    The Keras variable name.

  Raises:
    ValueError: for a name of another form.
  """
  layer, weight = split_variable(name)
  if weight in BATCH_NORM_VARIABLES:
    if not layer.endswith(_SLIM_BATCH_NORM):
      raise ValueError('Batch norm variable %r is not under a BatchNorm '
                       'scope.' % name)
    return '%s%s/%s' % (layer[:-len(_SLIM_BATCH_NORM)], batch_norm_suffix,
                        weight)
  return '%s%s/%s' % (layer, conv_suffix, weight)


@contextlib.contextmanager
def renamed_variables(rename_fn, root_scope=None, created=None):
  """Gives the variables created in this context the names rename_fn says.

  Layers inside keep their slim scopes (so their ops and arg_scopes are
  unchanged); only the variables get other names. Reusing a variable goes
  through the same renaming, so reuse and AUTO_REUSE work as usual.

  Args:
    rename_fn: callable(name relative to the current variable scope) ->
      name relative to root_scope.
    root_scope: scope of the new names; the current variable scope by
      default, '' for names from the graph's root.
    created: optional list; every variable got in the context is appended.

  Yields:
    Nothing; build the layers inside the `with` block.

  Raises:
    ValueError (when a variable is created): from rename_fn, or for a
      variable outside the current variable scope.
  """
  scope = tf.compat.v1.get_variable_scope()
  prefix = scope.name + '/' if scope.name else ''
  if root_scope is None:
    root = prefix
  else:
    root = root_scope + '/' if root_scope else ''

  def renaming_getter(getter, name, *args, **kwargs):
    if not name.startswith(prefix):
      raise ValueError('Variable %r is outside scope %r.' % (name, prefix))
    variable = getter(root + rename_fn(name[len(prefix):]), *args, **kwargs)
    if created is not None:
      created.append(variable)
    return variable

  with tf.compat.v1.variable_scope(scope, custom_getter=renaming_getter,
                                   auxiliary_name_scope=False):
    yield
