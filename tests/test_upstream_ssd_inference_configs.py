"""Every SSD config among the original's samples builds and predicts.

This module: the configs built as inference graphs; the others are in
tests/test_upstream_ssd_configs.py (the check: tests/upstream_ssd).
"""
import pytest

from tests import upstream_folder
from tests import upstream_ssd


@pytest.mark.parametrize('path', upstream_folder.params(
    keep=lambda path: upstream_ssd.is_ssd(path) and
    not upstream_ssd.is_training(path)))
def test_ssd_config_builds_and_predicts(path):
  upstream_ssd.check_builds_and_predicts(path)
