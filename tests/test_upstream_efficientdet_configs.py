"""The original's eight EfficientDet sample configs (TF2-era folder,
`ssd_efficientnet-b<N>_bifpn_keras`) build as inference graphs at 128x128
(tests/upstream_ssd.py) and predict, with the TF2 variable names: the
variant's Keras name (`EfficientDet-D<N>/...`), no `FeatureExtractor/`
scope. D0 builds in tests/models/test_ssd_efficientnet_bifpn_feature_extractor.py
(3 classes, 256x256): its names and shapes against the original's
checkpoint, its restores and detections, and its training (the tiny
EfficientDet); so here D1 to D7 build, as inference graphs (their variables
are the training graph's; the training mode's code is D0's).

A module of its own: its builds (B1 up to B6 backbones, up to 8 BiFPN
passes) are as long as the rest of test_upstream_tf2_configs, which xdist
runs beside it.
"""
import pytest

from tests import upstream_folder
from tests import upstream_ssd

# Built and checked in the extractor's module (see above).
D0 = 'ssd_efficientdet_d0_512x512_coco17_tpu-8.config'


def _is_built_here(path):
  return upstream_ssd.is_efficientdet(path) and not path.endswith('/' + D0)


def test_the_folder_has_eight_efficientdet_configs(upstream_configs_tf2):
  del upstream_configs_tf2  # the folder exists (else: skipped)
  paths = upstream_folder.paths(tf2=True)
  assert len([path for path in paths
              if upstream_ssd.is_efficientdet(path)]) == 8
  assert len([path for path in paths if _is_built_here(path)]) == 7


@pytest.mark.parametrize('path', upstream_folder.params(
    tf2=True, keep=_is_built_here))
def test_config_builds_and_predicts_with_tf2_names(path):
  upstream_ssd.check_builds_and_predicts(path, training=False)
  names = upstream_ssd.built(path, training=False).shapes
  assert not [name for name in names if name.startswith('FeatureExtractor/')]
  assert [name for name in names if name.startswith('EfficientDet-D')]
