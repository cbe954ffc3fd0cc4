"""Every SSD config among the original's samples builds and predicts.

This module: the configs built as training graphs; the others are in
tests/test_upstream_ssd_inference_configs.py (the check: tests/upstream_ssd).
"""
import pytest

from tests import upstream_folder
from tests import upstream_ssd


def test_the_upstream_folder_has_ssd_configs(upstream_configs):
  assert len(upstream_ssd.SSD_CONFIGS) > 30, upstream_configs


@pytest.mark.parametrize('path', upstream_folder.params(
    keep=lambda path: upstream_ssd.is_ssd(path) and
    upstream_ssd.is_training(path)))
def test_ssd_config_builds_and_predicts(path):
  upstream_ssd.check_builds_and_predicts(path)
