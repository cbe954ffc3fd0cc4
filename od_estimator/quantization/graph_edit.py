"""Small in-place graph edits used by the quantization rewrite."""
import re

# Ops under these prefixes are never rewritten (backprop and summaries).
SKIPPED_PREFIXES = ('gradients/', 'RMSProp/', 'Adagrad/', 'Const_',
                    'HistogramSummary', 'ScalarSummary')


def reroute(new_tensor, old_tensor, consumers=None):
  """Makes `consumers` (default: all) of `old_tensor` read `new_tensor`.

  Returns:
    The number of inputs changed.
  """
  targets = list(old_tensor.consumers())
  if consumers is not None:
    allowed = set(consumers)
    targets = [op for op in targets if op in allowed]
  changed = 0
  for op in targets:
    for index, tensor in enumerate(list(op.inputs)):
      if tensor is old_tensor:
        # TF has no public in-place input update for graph-mode ops.
        op._update_input(index, new_tensor)  # pylint: disable=protected-access
        changed += 1
  return changed


def context_of(name):
  """The name scope of an op name: 'a/b/Conv2D' -> 'a/b', 'x' -> ''."""
  match = re.search(r'^(.*)/([^/]+)', name)
  return match.group(1) if match else ''


def join(context, name):
  return context + '/' + name if context else name


def consumer_ops(tensor):
  """The distinct ops reading `tensor`, in graph order."""
  seen = []
  for op in tensor.consumers():
    if op not in seen:
      seen.append(op)
  return seen


def is_skipped(op):
  return op.name.startswith(SKIPPED_PREFIXES)
