"""The one family of errors that means "the user's input is wrong".

Commands print these as a single `error: ...` line and exit 1. Any other
exception is a bug in od_estimator and keeps its traceback.
"""


class UserInputError(ValueError):
  """Bad input from the user: config, data, flags, paths or checkpoints.

  A ValueError, so callers that catch ValueError keep working.
  """
