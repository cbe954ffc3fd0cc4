"""Refuses count flags out of range before a command does any work.

absl parses `--num_train_steps=-5` as a valid integer; left unchecked, it
fails later as a traceback (a uint32 config field refusing it) or is
silently ignored. The absl commands list their count flags with their
smallest meaningful value for check_minimums; the argparse tools give
their count flags the type at_least(minimum).
"""
import argparse

from od_estimator import errors


def check_minimums(flag_values, minimums):
  """Raises UserInputError naming the first flag below its minimum.

  Args:
    flag_values: absl FLAGS (or any object with the flags as attributes).
    minimums: {flag name: (smallest allowed value, what to give instead or
      None)}; a flag left unset (None) passes.

  Raises:
    errors.UserInputError: one line naming the flag, its value and the
      values it accepts.
  """
  for name, (minimum, hint) in minimums.items():
    value = getattr(flag_values, name)
    if value is not None and value < minimum:
      raise errors.UserInputError('--%s=%d: must be at least %d%s.' % (
          name, value, minimum, ' (%s)' % hint if hint else ''))


def check_required(flag_values, names):
  """Raises UserInputError naming the first of `names` left unset.

  absl's mark_flag_as_required only checks flags parsed after it is
  called; a command's main runs once they are parsed.
  """
  for name in names:
    if getattr(flag_values, name) in (None, ''):
      raise errors.UserInputError('--%s is required.' % name)


NUM_TRAIN_STEPS = (0, 'leave it unset, or 0, to train for '
                   'train_config.num_steps')
SAMPLE_1_OF_N = (1, '1 evaluates every example, n every n-th')
NON_NEGATIVE = (0, None)
POSITIVE = (1, None)


def at_least(minimum):
  """argparse type: an integer of at least `minimum`.

  argparse then reports `argument --FLAG: must be at least N, got M` in its
  one `error:` line, where a bad count would fail deep in the command.
  """
  def parse(text):
    try:
      value = int(text)
    except ValueError:
      raise argparse.ArgumentTypeError('expected an integer, got %r' %
                                       text) from None
    if value < minimum:
      raise argparse.ArgumentTypeError('must be at least %d, got %d' % (
          minimum, value))
    return value
  return parse


def fraction(text):
  """argparse type: a number in [0, 1] (a score or IoU threshold)."""
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError('expected a number, got %r' %
                                     text) from None
  if not 0.0 <= value <= 1.0:
    raise argparse.ArgumentTypeError('must be in [0, 1], got %s' % text)
  return value
