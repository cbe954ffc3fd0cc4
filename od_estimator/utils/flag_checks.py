"""Refuses count flags out of range before a command does any work.

absl parses `--num_train_steps=-5` as a valid integer; left unchecked, it
fails later as a traceback (a uint32 config field refusing it) or is
silently ignored. Each command lists its count flags with their smallest
meaningful value here.
"""
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


NUM_TRAIN_STEPS = (0, 'leave it unset, or 0, to train for '
                   'train_config.num_steps')
SAMPLE_1_OF_N = (1, '1 evaluates every example, n every n-th')
NON_NEGATIVE = (0, None)
POSITIVE = (1, None)
