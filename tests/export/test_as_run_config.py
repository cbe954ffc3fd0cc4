"""An export with another config than the checkpoint's as-run one warns."""
import os

import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.config import config_util
from od_estimator.export import as_run_config
from od_estimator.export import exporter
from tests import tiny_ssd

_FASTER_RCNN_CONFIG = os.path.join(tiny_ssd.REPO, 'samples', 'configs',
                                   'faster_rcnn_resnet50_shapes.config')


def _config(path, override=''):
  return config_util.read_pipeline_config(path, override or None)


def _model_dir(tmp_path, as_run_text=None):
  """A model_dir with a one-variable checkpoint and an as-run config."""
  model_dir = tmp_path / 'model'
  with tf.Graph().as_default():
    tf.compat.v1.get_variable('v', [1])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      prefix = saver.save(session, str(model_dir / 'model.ckpt'),
                          global_step=1)
  if as_run_text is not None:
    (model_dir / 'pipeline.config').write_text(as_run_text)
  return str(model_dir), prefix


def test_two_stage_differences_are_named():
  found = as_run_config.differences(
      _config(_FASTER_RCNN_CONFIG,
              'model { faster_rcnn { num_classes: 5 first_stage_max_proposals: '
              '300 image_resizer { fixed_shape_resizer { height: 320 width: '
              '320 } } feature_extractor { type: "faster_rcnn_resnet101" } '
              '} }'),
      _config(_FASTER_RCNN_CONFIG))
  assert found == [
      'num_classes 5 (as run: 3)', 'image size 320x320 (as run: 128x128)',
      'feature extractor type faster_rcnn_resnet101 (as run: '
      'faster_rcnn_resnet50)',
      'proposal count (first_stage_max_proposals) 300 (as run: 16)']


def test_another_meta_architecture_is_named_alone():
  assert as_run_config.differences(
      _config(tiny_ssd.DEMO_CONFIG), _config(_FASTER_RCNN_CONFIG)) == [
          'meta-architecture ssd (as run: faster_rcnn)']


def test_the_export_warns_in_one_line_before_building(tmp_path, caplog):
  with open(tiny_ssd.DEMO_CONFIG) as f:
    as_run = f.read()
  model_dir, prefix = _model_dir(tmp_path, as_run)
  edited = _config(tiny_ssd.DEMO_CONFIG, 'model { ssd { num_classes: 7 '
                   'image_resizer { fixed_shape_resizer { height: 64 width: '
                   '64 } } } }')
  # A training directory as output: refused right after the comparison.
  with pytest.raises(errors.UserInputError):
    exporter.export_inference_graph('image_tensor', edited, model_dir,
                                    model_dir)
  warnings = [r.getMessage() for r in caplog.records
              if 'the checkpoint was trained with' in r.getMessage()]
  as_run_path = os.path.join(model_dir, 'pipeline.config')
  assert warnings == [
      'the config exported differs from %s, the config the checkpoint was '
      'trained with: num_classes 7 (as run: 3), image size 64x64 (as run: '
      '160x160). The export builds the model of the config given; to export '
      'the model as trained, pass --pipeline_config_path=%s.' % (
          as_run_path, as_run_path)]
  assert as_run_config.warn_if_different(edited, prefix) == warnings[0]


@pytest.mark.parametrize('as_run', [None, 'same', 'not a config {'])
def test_no_warning_when_equal_or_without_an_as_run_config(tmp_path, as_run):
  with open(tiny_ssd.DEMO_CONFIG) as f:
    text = f.read()
  _, prefix = _model_dir(tmp_path, text if as_run == 'same' else as_run)
  assert as_run_config.warn_if_different(
      _config(tiny_ssd.DEMO_CONFIG), prefix) is None
