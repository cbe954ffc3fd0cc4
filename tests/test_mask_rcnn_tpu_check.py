"""`validate --check_tpu` on a static-shape Mask R-CNN config.

tests/tiny_mask_rcnn.py's config with the fake two-stage extractor, batch
8 = 8 shards x 1 and the static-shape options: groundtruth masks padded to
max_number_of_boxes, mask targets cropped with the matrix-product
crop-and-resize; XLA compiles the training step.
"""
import pytest

from od_estimator import __main__ as cli
from od_estimator.models import faster_rcnn_feature_extractor_registry
from tests import fakes
from tests import tiny_mask_rcnn
from tests.test_faster_rcnn_tpu_check import STATIC_SHAPES


@pytest.fixture(autouse=True)
def fake_extractor(monkeypatch):
  monkeypatch.setitem(
      faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
      'fake', fakes.FakeFasterRCNNFeatureExtractor)


def test_static_shape_mask_rcnn_step_compiles(tmp_path, capsys):
  config = tiny_mask_rcnn.write_config(
      tmp_path, tmp_path / 'data', extractor='fake',
      model_fields=STATIC_SHAPES, batch_size=8)
  code = cli.main(['validate', '--pipeline_config_path=%s' % config,
                   '--check_tpu', '--allow_local_paths'])
  out = capsys.readouterr().out
  assert code == 0, out
  assert 'XLA compiles the step' in out, out
