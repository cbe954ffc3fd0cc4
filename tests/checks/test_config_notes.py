"""Notes on fields without effect and on slow batch norm from scratch."""
import os

import pytest

from od_estimator.checks import config_notes
from od_estimator.checks import config_check
from od_estimator.config import config_util
from tests import upstream_folder

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO_CONFIG = os.path.join(REPO, 'samples', 'configs',
                           'ssd_mobilenet_v2_shapes.config')


def _demo_configs(override=''):
  return config_util.get_configs_from_pipeline_file(DEMO_CONFIG, override)


def test_the_demo_config_sets_no_field_without_effect():
  assert config_notes.notes(_demo_configs()) == []


@pytest.mark.parametrize('override, field', [
    ('train_config { sync_replicas: true replicas_to_aggregate: 8 }',
     'train_config.sync_replicas'),
    ('train_config { sync_replicas: true replicas_to_aggregate: 8 }',
     'train_config.replicas_to_aggregate'),
    ('train_config { max_number_of_boxes: 8 }',
     'train_config.max_number_of_boxes'),
    ('eval_config { num_examples: 200 }', 'eval_config.num_examples'),
    ('eval_config { max_evals: 1 }', 'eval_config.max_evals'),
    ('eval_config { eval_interval_secs: 60 }',
     'eval_config.eval_interval_secs'),
    ('eval_config { visualization_export_dir: "/tmp/v" }',
     'eval_config.visualization_export_dir'),
    ('eval_config { ignore_groundtruth: true }',
     'eval_config.ignore_groundtruth'),
    ('eval_config { export_path: "/tmp/e" }', 'eval_config.export_path'),
    ('train_input_reader { queue_capacity: 100 }',
     'train_input_reader.queue_capacity'),
    # A repeated message in an override is appended: a second eval input.
    ('eval_input_reader { min_after_dequeue: 10 }',
     'eval_input_reader[1].min_after_dequeue'),
])
def test_a_field_without_effect_gets_one_note_naming_it(override, field):
  notes = config_notes.notes(_demo_configs(override))
  naming = [note for note in notes if note.startswith(field + ' ')]
  assert len(naming) == 1, notes
  assert 'has no effect: ' in naming[0]


def test_deprecated_train_max_number_of_boxes_points_to_the_input_reader():
  notes = config_notes.notes(_demo_configs(
      'train_config { max_number_of_boxes: 8 }'))
  assert any('train_input_reader.max_number_of_boxes' in note
             for note in notes)


def test_legacy_fields_of_upstream_sample_configs_are_noted():
  # The original's ssd_mobilenet_v1_coco sets both kinds.
  configs = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path('ssd_mobilenet_v1_coco'))
  notes = config_notes.notes(configs)
  assert any(note.startswith('eval_config.num_examples has no effect: used '
                             "only by the original's legacy eval.py")
             for note in notes), notes
  assert any(note.startswith('eval_config.max_evals') for note in notes)


def test_fields_being_implemented_elsewhere_are_not_in_the_table():
  for field in ('num_visualizations', 'max_num_boxes_to_visualize',
                'min_score_threshold', 'retain_original_images',
                'skip_scores', 'skip_labels', 'visualize_groundtruth_boxes',
                'groundtruth_box_visualization_color',
                'keep_image_id_for_visualization_export', 'super_categories',
                'skip_predictions_for_unlabeled_class',
                'use_dummy_loss_in_eval', 'parameterized_metric',
                'keypoint_edge', 'metrics_set'):
    assert ('eval_config', field) not in config_notes.NO_EFFECT_FIELDS


_FROM_SCRATCH_MOBILENET = (
    'model { ssd { feature_extractor { '
    'override_base_feature_extractor_hyperparams: false } } }')


def test_from_scratch_with_the_backbone_batch_norm_gets_a_note():
  note = config_notes.from_scratch_batch_norm_note(
      _demo_configs(_FROM_SCRATCH_MOBILENET))
  assert note is not None
  assert "ssd_mobilenet_v2 backbone's own batch norm" in note
  assert '0.9997' in note
  assert 'override_base_feature_extractor_hyperparams: true' in note
  assert 'batch_norm { decay: 0.97 }' in note
  assert 'fine_tune_checkpoint' in note


def test_slow_conv_hyperparams_decay_gets_a_note_naming_the_field():
  note = config_notes.from_scratch_batch_norm_note(_demo_configs(
      'model { ssd { feature_extractor { conv_hyperparams { batch_norm { '
      'decay: 0.9997 } } } } }'))
  assert ('model.ssd.feature_extractor.conv_hyperparams.batch_norm.decay '
          '0.9997') in note
  assert 'backbone' not in note


def test_no_batch_norm_note_with_a_fine_tune_checkpoint_or_a_fast_decay():
  assert config_notes.from_scratch_batch_norm_note(_demo_configs()) is None
  assert config_notes.from_scratch_batch_norm_note(_demo_configs(
      _FROM_SCRATCH_MOBILENET + ' train_config { fine_tune_checkpoint: '
      '"x/model.ckpt" }')) is None


def test_the_original_coco_config_trained_from_scratch_gets_the_note():
  configs = config_util.get_configs_from_pipeline_file(
      upstream_folder.config_path('ssd_mobilenet_v1_coco'),
      'train_config { fine_tune_checkpoint: "" }')
  note = config_notes.from_scratch_batch_norm_note(configs)
  assert "ssd_mobilenet_v1 backbone's own batch norm" in note
  assert 'box_predictor.convolutional_box_predictor.conv_hyperparams' in note


_FASTER_RCNN_CONFIG = os.path.join(REPO, 'samples', 'configs',
                                   'faster_rcnn_resnet50_shapes.config')


@pytest.mark.parametrize('config', [
    _FASTER_RCNN_CONFIG,
    upstream_folder.config_path('mask_rcnn_resnet50_atrous_coco')])
def test_two_stage_from_scratch_with_frozen_batch_norm_gets_a_note(config):
  frozen = config_util.get_configs_from_pipeline_file(
      config, 'model { faster_rcnn { feature_extractor { '
      'batch_norm_trainable: false } } } train_config { '
      'fine_tune_checkpoint: "" }')
  note = config_notes.from_scratch_batch_norm_note(frozen)
  assert note.startswith('training from scratch (no train_config.'
                         'fine_tune_checkpoint) with frozen batch norm')
  assert "faster_rcnn_resnet50 backbone's batch norms" in note
  assert 'batch_norm_trainable: true' in note
  assert note.endswith('or start from a fine_tune_checkpoint.')
  assert '\n' not in note
  assert note in config_notes.notes(frozen)


def test_no_two_stage_note_with_trainable_batch_norm_or_a_checkpoint():
  assert config_notes.from_scratch_batch_norm_note(
      config_util.get_configs_from_pipeline_file(_FASTER_RCNN_CONFIG)) is None
  assert config_notes.from_scratch_batch_norm_note(
      config_util.get_configs_from_pipeline_file(
          _FASTER_RCNN_CONFIG, 'model { faster_rcnn { feature_extractor { '
          'batch_norm_trainable: false } } } train_config { '
          'fine_tune_checkpoint: "x/model.ckpt" }')) is None


def test_validate_reports_the_notes(tmp_path):
  text = open(DEMO_CONFIG).read().replace(
      'batch_size: 16', 'batch_size: 16 sync_replicas: true')
  path = tmp_path / 'pipeline.config'
  path.write_text(text)
  report = config_check.Report(str(path))
  config_check.check_configs(
      config_util.get_configs_from_pipeline_file(str(path)), report,
      check_train_input_paths=False)
  assert [n for n in report.notes if n.startswith(
      'train_config.sync_replicas has no effect')]
