"""validate and the launch check name a reader that lacks load_instance_masks.

A Mask R-CNN (mask_rcnn_box_predictor.predict_instance_masks: true) trains
on groundtruth masks and its evaluation computes the mask loss too; a mask
metrics set evaluates them. The original fails deep in training on the
sample configs whose readers do not load them; here it is one line per
reader before launch.
"""
import os

import pytest
from google.protobuf import text_format

from od_estimator import errors
from od_estimator.input_pipeline import inputs
from od_estimator.checks import launch_check
from od_estimator.checks import config_check
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util
from tests import upstream_folder

_FIELD = 'load_instance_masks'


def _mask_error_lines(report):
  return [str(error) for error in report.errors
          if (error.field or '').endswith('.' + _FIELD)]


def _readers_without_masks(pipeline):
  readers = []
  if not pipeline.train_input_reader.load_instance_masks:
    readers.append('train_input_reader')
  readers += ['eval_input_reader[%d]' % i
              for i, reader in enumerate(pipeline.eval_input_reader)
              if not reader.load_instance_masks]
  return readers


@pytest.fixture
def skip_model_build(monkeypatch):
  """The reader checks need no model graph; building big ones is slow."""
  monkeypatch.setattr(config_check, '_check_model_builds',
                      lambda model_config, report: None)


def test_upstream_mask_configs(upstream_configs, skip_model_build):
  flagged, mask_configs = [], 0
  for path in upstream_folder.paths():
    configs = config_util.get_configs_from_pipeline_file(path)
    if not inputs.predicts_instance_masks(configs['model']):
      continue
    mask_configs += 1
    pipeline = config_util.read_pipeline_config(path)
    expected = _readers_without_masks(pipeline)
    report = config_check.validate(path)
    lines = _mask_error_lines(report)
    assert len(lines) == len(expected), (path, lines)
    for reader, line in zip(expected, lines):
      assert '\n' not in line
      assert 'field `%s.%s`' % (reader, _FIELD) in line
      assert 'predict_instance_masks: true' in line
      assert 'add load_instance_masks: true to %s' % reader in line
    if expected:
      flagged.append(os.path.basename(path))
  assert mask_configs >= 1
  # Some of the original's mask configs load masks, some do not.
  assert 0 < len(flagged) < mask_configs, flagged


def _tiny_pipeline(predict_masks, train_masks, eval_masks, metrics_set=''):
  text = """
    model { faster_rcnn { num_classes: 3
      image_resizer { fixed_shape_resizer { height: 32 width: 32 } }
      second_stage_box_predictor { mask_rcnn_box_predictor {
        predict_instance_masks: %s } } } }
    train_config { batch_size: 1 }
    train_input_reader { load_instance_masks: %s
      tf_record_input_reader { input_path: "x.record" } }
    eval_config { batch_size: 1 %s }
    eval_input_reader { load_instance_masks: %s
      tf_record_input_reader { input_path: "x.record" } }
  """ % (str(predict_masks).lower(), str(train_masks).lower(),
         ('metrics_set: "%s"' % metrics_set) if metrics_set else '',
         str(eval_masks).lower())
  return config_util.create_configs_from_pipeline_proto(
      text_format.Parse(text, pipeline_pb2.TrainEvalPipelineConfig()))


@pytest.mark.parametrize('case,expected', [
    ((True, False, False, ''), ['train_input_reader',
                                'eval_input_reader[0]']),
    ((True, True, False, ''), ['eval_input_reader[0]']),
    ((True, True, True, 'coco_mask_metrics'), []),
    ((False, False, False, 'coco_detection_metrics'), []),
    ((False, False, False, 'coco_mask_metrics'), ['eval_input_reader[0]']),
    ((False, False, False, 'pascal_voc_instance_segmentation_metrics'),
     ['eval_input_reader[0]']),
])
def test_readers_named(skip_model_build, case, expected):
  configs = _tiny_pipeline(*case)
  report = config_check.Report('tiny.config')
  config_check.check_configs(configs, report, check_train_input_paths=False,
                         check_eval_input_paths=False)
  lines = _mask_error_lines(report)
  assert [line.split('`')[1] for line in lines] == [
      reader + '.' + _FIELD for reader in expected]
  if case[3] != '' and not case[0] and expected:
    assert 'metrics_set %s evaluates instance masks' % case[3] in lines[0]


def test_launch_check_stops_with_the_line(skip_model_build):
  configs = _tiny_pipeline(True, False, True)
  with pytest.raises(errors.UserInputErrors) as raised:
    launch_check.check(configs, 'mask.config', evaluation_only=True)
  text = str(raised.value)
  assert ('mask.config: field `train_input_reader.load_instance_masks`: the '
          'model predicts instance masks') in text
  assert 'eval_input_reader[0].load_instance_masks' not in text


def test_input_fns_refuse_before_reading(skip_model_build):
  configs = _tiny_pipeline(True, False, False)
  with pytest.raises(config_util.ConfigError,
                     match=r'train_input_reader\.load_instance_masks'):
    inputs.train_input(configs['train_config'], configs['train_input_config'],
                       configs['model'], model=object())
  with pytest.raises(config_util.ConfigError,
                     match=r'eval_input_reader\.load_instance_masks'):
    inputs.eval_input(configs['eval_config'],
                      configs['eval_input_configs'][0], configs['model'],
                      model=object())
