"""`validate --check_tpu` on Faster R-CNN configs.

The tiny config of tests/tiny_faster_rcnn.py with the fake two-stage
extractor (tests/fakes.py), batch 8 = 8 shards x 1: with the static-shape
options its training step has static shapes and XLA compiles it; without
them the anchor pruning and the first stage's non-max suppression are
named with the fields to set. The same holds for its R-FCN form
(tests/tiny_rfcn.py), whose position-sensitive crops then take the
matrix-product form, and for a feature pyramid (tests/tiny_faster_rcnn_fpn.py
with the fake pyramid extractor): the multi-level RPN and ROI crop. The
original's TF2 Faster R-CNN ResNet-50 (C4) sample config, whose own
static-shape options are set, compiles as it is (tests/tiny_resnet.py's
Keras ResNet for its faster_rcnn_resnet50_keras, at 64x64).
"""
import pytest

from od_estimator import __main__ as cli
from od_estimator.models import faster_rcnn_feature_extractor_registry
from tests import fakes
from tests import tf2_faster_rcnn
from tests import tiny_faster_rcnn
from tests import tiny_faster_rcnn_fpn
from tests import tiny_resnet
from tests import tiny_rfcn
from tests import tiny_tf2_ssd

STATIC_SHAPES = ' '.join([
    'use_static_shapes: true', 'use_static_balanced_label_sampler: true',
    'use_matmul_gather_in_matcher: true', 'use_matmul_crop_and_resize: true',
    'clip_anchors_to_image: true'])


@pytest.fixture(autouse=True)
def fake_extractor(monkeypatch):
  monkeypatch.setitem(
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
      'fake', fakes.FakeFasterRCNNFeatureExtractor)


def _write_fake_pyramid_config(directory, data_dir, extractor, **kwargs):
  del extractor  # The fake pyramid's instead.
  return tiny_faster_rcnn_fpn.write_config(directory, data_dir,
                                           extractor='fake_pyramid', **kwargs)


def _check_tpu(tmp_path, capsys, model_fields,
               write_config=tiny_faster_rcnn.write_config):
  config = write_config(tmp_path, tmp_path / 'data', extractor='fake',
                        model_fields=model_fields, batch_size=8)
  code = cli.main(['validate', '--pipeline_config_path=%s' % config,
                   '--check_tpu', '--allow_local_paths'])
  return code, capsys.readouterr().out


def test_static_shape_faster_rcnn_step_compiles(tmp_path, capsys):
  code, out = _check_tpu(tmp_path, capsys, STATIC_SHAPES)
  assert code == 0, out
  assert 'XLA compiles the step' in out, out


def test_static_shape_rfcn_step_compiles(tmp_path, capsys):
  code, out = _check_tpu(tmp_path, capsys, STATIC_SHAPES,
                         write_config=tiny_rfcn.write_config)
  assert code == 0, out
  assert 'XLA compiles the step' in out, out
  with open(tmp_path / 'pipeline.config') as f:
    assert 'rfcn_box_predictor' in f.read()


def test_static_shape_feature_pyramid_step_compiles(tmp_path, capsys,
                                                    monkeypatch):
  monkeypatch.setitem(
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
      'fake_pyramid', fakes.FakePyramidFeatureExtractor)
  code, out = _check_tpu(tmp_path, capsys, STATIC_SHAPES,
                         write_config=_write_fake_pyramid_config)
  assert code == 0, out
  assert 'XLA compiles the step' in out, out
  with open(tmp_path / 'pipeline.config') as f:
    assert 'multiscale_anchor_generator' in f.read()


def test_static_shape_tf2_faster_rcnn_resnet_step_compiles(tmp_path, capsys):
  extractor = 'faster_rcnn_resnet50_keras'
  with tiny_resnet.registered(), tiny_resnet.keras_c4_as(extractor):
    config = tiny_tf2_ssd.write_config(
        tmp_path, tmp_path / 'data', config=tf2_faster_rcnn.RESNET50,
        tiny=tf2_faster_rcnn.tiny_c4_text(
            '', 'batch_size: 8 max_number_of_boxes: 4'))
    code = cli.main(['validate', '--pipeline_config_path=%s' % config,
                     '--check_tpu', '--allow_local_paths'])
  out = capsys.readouterr().out
  assert code == 0, out
  assert 'XLA compiles the step' in out, out
  with open(config) as f:
    text = f.read()
  assert extractor in text and 'use_static_shapes: true' in text


def test_dynamic_faster_rcnn_step_names_the_static_shapes_field(tmp_path,
                                                                capsys):
  code, out = _check_tpu(tmp_path, capsys, '')
  assert code != 0
  assert 'NonMaxSuppression' in out, out
  assert 'model.faster_rcnn.use_static_shapes: true' in out, out
  assert 'model.faster_rcnn.clip_anchors_to_image: true' in out, out
