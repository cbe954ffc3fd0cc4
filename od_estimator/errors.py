"""The one family of errors that means "the user's input is wrong".

Commands print these as a single `error: ...` line and exit 1. Any other
exception is a bug in od_estimator and keeps its traceback.
"""
import re
import sys


class UserInputError(ValueError):
  """Bad input from the user: config, data, flags, paths or checkpoints.

  A ValueError, so callers that catch ValueError keep working.
  """


class ConfigError(UserInputError):
  """A config that cannot be used, with where and why.

  Attributes:
    path: the config file, or None for text given directly.
    line: 1-based line of the problem, or None.
    column: 1-based column of the problem, or None.
    field: dotted path of the field concerned, or None.
    problem: what is wrong, in a sentence.
    hint: what would fix it, or None.
  """

  def __init__(self, problem, path=None, line=None, column=None, field=None,
               hint=None):
    self.path, self.line, self.column = path, line, column
    self.field, self.problem, self.hint = field, problem, hint
    super().__init__(self._format())

  def _format(self):
    where = self.path or '<config text>'
    if self.line is not None:
      where += ':%d' % self.line
      if self.column is not None:
        where += ':%d' % self.column
    text = where + ': '
    if self.field:
      text += 'field `%s`: ' % self.field
    text += self.problem
    if self.hint:
      text += ' (hint: %s)' % self.hint
    return text


class UserInputErrors(UserInputError):
  """Several problems with the user's input, found together.

  Commands print one `error: ...` line per problem.

  Attributes:
    problems: the problems, each an exception or a string.
  """

  def __init__(self, problems):
    self.problems = list(problems)
    super().__init__('\n'.join(str(problem) for problem in self.problems))


def one_line(problem):
  """The text of an error (or any object) on one line, spaces collapsed."""
  return ' '.join(str(problem).split())


def fail(message):
  """Prints `error: message` on one line to stderr and exits with 1.

  A UserInputErrors prints one such line per problem.
  """
  for problem in getattr(message, 'problems', None) or [message]:
    print('error: %s' % one_line(problem), file=sys.stderr)
  sys.exit(1)


def op_error_words(error):
  """A TensorFlow OpError's own message on one line.

  Not the op context (`[[{{node ...}}]]`), nor the Python stack of the
  failing node (`Detected at node X defined at ...: <stack> Node: 'X'`),
  whose source files would be taken for the path at fault.
  """
  text = (error.message or '').split('[[')[0]
  text = re.split(r"^Node: '[^'\n]*'$", text, flags=re.MULTILINE)[-1]
  return one_line(text)
