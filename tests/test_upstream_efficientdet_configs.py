"""The original's eight EfficientDet sample configs (TF2-era folder,
`ssd_efficientnet-b<N>_bifpn_keras`) build as training graphs at 128x128
(tests/upstream_ssd.py) and predict, with the TF2 variable names: the
variant's Keras name (`EfficientDet-D<N>/...`), no `FeatureExtractor/`
scope. D0's names and shapes against the original's checkpoint, its restores
and detections: tests/models/test_ssd_efficientnet_bifpn_feature_extractor.py.

A module of its own: its builds (B0 up to B6 backbones, up to 8 BiFPN
passes) are as long as the rest of test_upstream_tf2_configs, which xdist
runs beside it.
"""
import pytest

from tests import upstream_folder
from tests import upstream_ssd


def test_the_folder_has_eight_efficientdet_configs(upstream_configs_tf2):
  del upstream_configs_tf2  # the folder exists (else: skipped)
  assert len([path for path in upstream_folder.paths(tf2=True)
              if upstream_ssd.is_efficientdet(path)]) == 8


@pytest.mark.parametrize('path', upstream_folder.params(
    tf2=True, keep=upstream_ssd.is_efficientdet))
def test_config_builds_and_predicts_with_tf2_names(path):
  upstream_ssd.check_builds_and_predicts(path, training=True)
  names = upstream_ssd.built(path, training=True).shapes
  assert not [name for name in names if name.startswith('FeatureExtractor/')]
  assert [name for name in names if name.startswith('EfficientDet-D')]
