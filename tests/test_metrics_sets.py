"""eval_config.metrics_set: every name of the original is accepted,
deprecated, or refused saying what it needs; never called unknown. The
names and their needs come from one table (metrics/metric_sets)."""
import pytest

from od_estimator.input_pipeline import input_checks
from od_estimator.metrics import eval_util
from od_estimator.metrics import metric_sets
from od_estimator.protos import eval_pb2
from od_estimator.protos import input_reader_pb2
from od_estimator.config import config_util
from tests import log_capture

CATS = [{'id': 1, 'name': 'cat'}]

# Every name the original's EVAL_METRICS_CLASS_DICTs (model_lib's and the
# legacy eval.py's, over its versions) accepted.
ORIGINAL_NAMES = (
    'coco_detection_metrics', 'coco_mask_metrics', 'coco_keypoint_metrics',
    'coco_panoptic_metrics', 'lvis_mask_metrics',
    'pascal_voc_detection_metrics', 'weighted_pascal_voc_detection_metrics',
    'precision_at_recall_detection_metrics',
    'pascal_voc_instance_segmentation_metrics',
    'weighted_pascal_voc_instance_segmentation_metrics',
    'oid_V2_detection_metrics', 'open_images_V2_detection_metrics',
    'oid_challenge_detection_metrics',
    'oid_challenge_object_detection_metrics',
    'oid_challenge_segmentation_metrics', 'pascal_voc_metrics',
    'weighted_pascal_voc_metrics', 'open_images_metrics')


@pytest.mark.parametrize('name', ORIGINAL_NAMES)
def test_no_name_of_the_original_is_unknown(name):
  try:
    current = metric_sets.check_metrics_set(name)
  except config_util.ConfigError as error:
    assert 'unknown' not in str(error)
    assert metric_sets.METRIC_SETS[name].unsupported in str(error)
  else:
    assert current in eval_util.EVAL_METRICS_CLASS_DICT


@pytest.mark.parametrize('old,current', [
    ('open_images_V2_detection_metrics', 'oid_V2_detection_metrics'),
    ('open_images_metrics', 'oid_V2_detection_metrics'),
    ('oid_challenge_object_detection_metrics',
     'oid_challenge_detection_metrics'),
    ('pascal_voc_metrics', 'pascal_voc_detection_metrics'),
    ('weighted_pascal_voc_metrics', 'weighted_pascal_voc_detection_metrics'),
])
def test_deprecated_names_run_the_current_evaluator_with_a_warning(
    old, current):
  with log_capture.absl_messages() as records:
    evaluators = eval_util.get_evaluators(
        eval_pb2.EvalConfig(metrics_set=[old]), CATS)
  expected = eval_util.EVAL_METRICS_CLASS_DICT[current](CATS)
  assert [e.metric_names() for e in evaluators] == [expected.metric_names()]
  assert any('%r is deprecated; use %r' % (old, current) in message
             for message in records)


def test_an_alias_next_to_its_current_name_evaluates_once():
  config = eval_pb2.EvalConfig(metrics_set=[
      'oid_V2_detection_metrics', 'open_images_V2_detection_metrics'])
  assert len(eval_util.get_evaluators(config, CATS)) == 1


@pytest.mark.parametrize('name', [
    'coco_mask_metrics', 'pascal_voc_instance_segmentation_metrics',
    'weighted_pascal_voc_instance_segmentation_metrics'])
def test_mask_metrics_sets_are_accepted(name):
  assert metric_sets.check_metrics_set(name) == name


@pytest.mark.parametrize('name', [
    'oid_challenge_segmentation_metrics', 'lvis_mask_metrics'])
def test_other_mask_metrics_are_refused_naming_what_is_missing(name):
  config = eval_pb2.EvalConfig(metrics_set=[name])
  with pytest.raises(config_util.ConfigError) as raised:
    eval_util.get_evaluators(config, CATS)
  message = str(raised.value)
  assert 'eval_config.metrics_set' in message
  assert 'is not supported yet' in message
  assert 'coco_mask_metrics' in message  # the accepted names


def test_an_unknown_name_lists_the_accepted_ones():
  with pytest.raises(config_util.ConfigError,
                     match="unknown metrics set 'coco_map'.*accepted: "
                     'coco_detection_metrics'):
    metric_sets.check_metrics_set('coco_map')


def test_the_table_holds_exactly_the_names_of_the_original():
  assert (set(metric_sets.METRIC_SETS) | set(metric_sets.DEPRECATED) ==
          set(ORIGINAL_NAMES))
  assert set(metric_sets.DEPRECATED.values()) <= set(metric_sets.supported())


@pytest.mark.parametrize('name', metric_sets.supported())
def test_every_supported_set_builds_its_evaluator(name):
  (evaluator,) = eval_util.get_evaluators(
      eval_pb2.EvalConfig(metrics_set=[name]), CATS)
  metric_set = metric_sets.METRIC_SETS[name]
  assert type(evaluator) is metric_set.evaluator  # pylint: disable=unidiomatic-typecheck
  assert evaluator.metric_names()
  assert metric_set.needs_masks == evaluator.evaluates_masks


@pytest.mark.parametrize('name', ORIGINAL_NAMES)
def test_the_input_checks_ask_masks_of_exactly_the_mask_sets(name):
  reader = input_reader_pb2.InputReader()
  check = lambda: input_checks.check_input_options(
      reader, 'eval_input_reader', metrics_sets=[name])
  if name in ('coco_mask_metrics', 'pascal_voc_instance_segmentation_metrics',
              'weighted_pascal_voc_instance_segmentation_metrics',
              'oid_challenge_segmentation_metrics', 'lvis_mask_metrics'):
    with pytest.raises(config_util.ConfigError,
                       match='metrics_set %s evaluates instance masks' % name):
      check()
    reader.load_instance_masks = True
  check()
