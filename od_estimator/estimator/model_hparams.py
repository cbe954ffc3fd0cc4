"""The original's model_hparams: create_hparams, without tf.contrib.

    hparams = model_hparams.create_hparams(FLAGS.hparams_overrides)
    model_lib.create_estimator_and_inputs(run_config=config, hparams=hparams,
                                          ...)

The override string has the --hparams_overrides syntax of model_main
(config_overrides.parse_hparams_overrides). Besides the original's
load_pretrained it may hold config override keys (e.g.
train_config.batch_size=4), which create_estimator_and_inputs applies as
model_main does.
"""
from od_estimator import errors
from od_estimator.config import config_overrides


class HParams:
  """Named hyperparameters: tf.contrib.training.HParams' common methods.

  Values are attributes (`hparams.load_pretrained`); values() returns them
  as a dict; parse() applies a "name=value,..." string.
  """

  def __init__(self, **values):
    self.__dict__['_values'] = dict(values)

  def __getattr__(self, name):
    try:
      return self.__dict__['_values'][name]
    except KeyError:
      raise AttributeError('HParams has no %r' % name) from None

  def __setattr__(self, name, value):
    self.set_hparam(name, value)

  def __contains__(self, name):
    return name in self._values

  def __repr__(self):
    return 'HParams(%s)' % ', '.join(
        '%s=%r' % item for item in sorted(self._values.items()))

  def values(self):
    """Returns a dict of every hyperparameter's value."""
    return dict(self._values)

  def get(self, name, default=None):
    return self._values.get(name, default)

  def add_hparam(self, name, value):
    """Adds a new hyperparameter; ValueError if it exists."""
    if name in self._values:
      raise ValueError('Hyperparameter %r already exists.' % name)
    self._values[name] = value

  def set_hparam(self, name, value):
    """Sets a hyperparameter, keeping a boolean one boolean.

    Raises:
      errors.UserInputError: when `name` is boolean and `value` is not.
    """
    if isinstance(self._values.get(name), bool) and not isinstance(value,
                                                                   bool):
      raise errors.UserInputError(
          'Hyperparameter %s must be true or false, got %r.' % (name, value))
    self._values[name] = value

  def parse(self, values):
    """Applies a "name=value,name2=[v1,v2]" string; returns self."""
    for name, value in config_overrides.parse_hparams_overrides(
        values).items():
      self.set_hparam(name, value)
    return self


def create_hparams(hparams_overrides=None):
  """Returns the hyperparameters with any overrides applied.

  Args:
    hparams_overrides: optional "name=value,..." string (as
      --hparams_overrides).

  Returns:
    An HParams with load_pretrained (default True: the pipeline config's
    fine_tune_checkpoint is loaded for training) and the overrides.
  """
  hparams = HParams(load_pretrained=True)
  if hparams_overrides:
    hparams.parse(hparams_overrides)
  return hparams
