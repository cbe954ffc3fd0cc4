"""The one family of errors that means "the user's input is wrong".

Commands print these as a single `error: ...` line and exit 1. Any other
exception is a bug in od_estimator and keeps its traceback.
"""
import sys


class UserInputError(ValueError):
  """Bad input from the user: config, data, flags, paths or checkpoints.

  A ValueError, so callers that catch ValueError keep working.
  """


class UserInputErrors(UserInputError):
  """Several problems with the user's input, found together.

  Commands print one `error: ...` line per problem.

  Attributes:
    problems: the problems, each an exception or a string.
  """

  def __init__(self, problems):
    self.problems = list(problems)
    super().__init__('\n'.join(str(problem) for problem in self.problems))


def fail(message):
  """Prints `error: message` on one line to stderr and exits with 1.

  A UserInputErrors prints one such line per problem.
  """
  for problem in getattr(message, 'problems', None) or [message]:
    print('error: %s' % ' '.join(str(problem).split()), file=sys.stderr)
  sys.exit(1)
