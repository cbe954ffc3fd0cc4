"""The Faster and Mask R-CNN sample configs (make demo_faster_rcnn,
make demo_mask_rcnn) keep working.

It parses, `od-estimator validate` passes it as written (its paths are
relative to the launch directory), it sets no field without effect, and its
training graph builds through model_fn (images made smaller, for speed).
"""
import os

import pytest
import tensorflow as tf

from od_estimator.checks import config_notes
from od_estimator.input_pipeline import inputs
from od_estimator.estimator import model_lib
from od_estimator.checks import config_check
from od_estimator.builders import model_builder
from od_estimator.dataset_tools import create_synthetic_tf_record as synth
from od_estimator.config import config_util

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_CONFIGS = [
    os.path.join(REPO, 'samples', 'configs', name + '_resnet50_shapes.config')
    for name in ('faster_rcnn', 'mask_rcnn')]
# The losses TensorBoard shows for every sample config (Mask R-CNN adds
# Loss/BoxClassifierLoss/mask_loss).
LOSS_TAGS = {'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss',
             'Loss/BoxClassifierLoss/localization_loss',
             'Loss/BoxClassifierLoss/classification_loss', 'Loss/total_loss'}
# A 64-pixel image still leaves block3 a 4x4 map at stride 16.
SMALL_IMAGES = ('model { faster_rcnn { image_resizer { fixed_shape_resizer '
                '{ height: 64 width: 64 } } } }')


def _write_demo_data(root):
  """Shapes records where the config expects them, under root."""
  synth.create_dataset(str(root / 'demo_out' / 'data'), num_train=2,
                       num_val=1, image_size=64, num_train_shards=2,
                       num_val_shards=1)


@pytest.mark.parametrize('sample_config', SAMPLE_CONFIGS)
def test_the_sample_config_parses_as_a_faster_rcnn_resnet50(sample_config):
  configs = config_util.get_configs_from_pipeline_file(sample_config)
  model = configs['model']
  assert model.WhichOneof('model') == 'faster_rcnn'
  assert model.faster_rcnn.feature_extractor.type == 'faster_rcnn_resnet50'
  assert model.faster_rcnn.num_classes == len(synth.CLASSES)


@pytest.mark.parametrize('sample_config', SAMPLE_CONFIGS)
def test_the_sample_config_sets_no_field_without_effect(sample_config):
  configs = config_util.get_configs_from_pipeline_file(sample_config)
  assert config_notes.notes(configs) == []


@pytest.mark.parametrize('sample_config', SAMPLE_CONFIGS)
def test_validate_passes_the_sample_config_from_the_repository_root(
    tmp_path, monkeypatch, sample_config):
  _write_demo_data(tmp_path)
  monkeypatch.chdir(tmp_path)
  report = config_check.validate(sample_config)
  assert not report.errors, [str(error) for error in report.errors]


@pytest.mark.parametrize('sample_config', SAMPLE_CONFIGS)
def test_the_sample_config_builds_its_training_graph(tmp_path, monkeypatch,
                                                     sample_config):
  _write_demo_data(tmp_path)
  monkeypatch.chdir(tmp_path)
  configs = config_util.get_configs_from_pipeline_file(sample_config,
                                                       SMALL_IMAGES)
  model_fn = model_lib.create_model_fn(
      lambda is_training, add_summaries: model_builder.build(
          configs['model'], is_training, add_summaries), configs,
      hparams={'load_pretrained': False})
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        inputs.train_input(configs['train_config'],
                           configs['train_input_config'],
                           configs['model'])).get_next()
    spec = model_fn(features, labels, tf.estimator.ModeKeys.TRAIN, {})
    batch_size = configs['train_config'].batch_size
    assert features['image'].shape.as_list() == [batch_size, 64, 64, 3]
    assert spec.train_op is not None
    assert spec.loss.shape.rank == 0
    tags = {tf.make_ndarray(summary.op.inputs[0].op.get_attr('value'))
            .item().decode() for summary in
            tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
            if summary.op.type == 'ScalarSummary'}
  expected = set(LOSS_TAGS)
  if 'mask_rcnn' in sample_config:
    expected.add('Loss/BoxClassifierLoss/mask_loss')
  assert expected <= tags, sorted(tags)
