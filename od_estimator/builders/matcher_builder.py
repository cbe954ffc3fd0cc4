"""Builds a Matcher from a matcher_pb2.Matcher config."""
from od_estimator import errors
from od_estimator.matchers import argmax_matcher
from od_estimator.matchers import bipartite_matcher
from od_estimator.protos import matcher_pb2


def _build_argmax(config):
  # ignore_thresholds: every anchor is matched to its best groundtruth box,
  # so the threshold fields are not used.
  matched_threshold = unmatched_threshold = None
  if not config.ignore_thresholds:
    matched_threshold = config.matched_threshold
    unmatched_threshold = config.unmatched_threshold
  try:
    return argmax_matcher.ArgMaxMatcher(
        matched_threshold=matched_threshold,
        unmatched_threshold=unmatched_threshold,
        negatives_lower_than_unmatched=config.negatives_lower_than_unmatched,
        force_match_for_each_row=config.force_match_for_each_row,
        use_matmul_gather=config.use_matmul_gather)
  except ValueError as error:
    raise errors.UserInputError(
        'ArgMaxMatcher.matched_threshold / unmatched_threshold / '
        'negatives_lower_than_unmatched are inconsistent: %s' % error
    ) from error


# Keyed by the `matcher_oneof` field name; each takes that field's message.
_BUILDERS = {
    'argmax_matcher': _build_argmax,
    'bipartite_matcher':
        lambda config: bipartite_matcher.GreedyBipartiteMatcher(
            use_matmul_gather=config.use_matmul_gather),
}


def build(matcher_config):
  """Builds a matcher.

  Args:
    matcher_config: matcher_pb2.Matcher.

  Returns:
    core.matcher.Matcher.

  Raises:
    ValueError: if the config is not a Matcher proto, the oneof is unset, or
      the argmax thresholds are inconsistent (unmatched_threshold above
      matched_threshold, or equal to it with
      negatives_lower_than_unmatched: false).
  """
  if not isinstance(matcher_config, matcher_pb2.Matcher):
    raise ValueError('matcher_config must be a matcher_pb2.Matcher, got %s.'
                     % type(matcher_config).__name__)
  which = matcher_config.WhichOneof('matcher_oneof')
  if which is None:
    raise errors.UserInputError(
        'Empty matcher: Matcher.matcher_oneof is not set.')
  return _BUILDERS[which](getattr(matcher_config, which))
