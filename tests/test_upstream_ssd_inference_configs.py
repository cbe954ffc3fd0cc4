"""The original's SSD sample configs built as inference graphs: each predicts.

The released zoo models among them also hold the original's variables. The
other configs: tests/test_upstream_ssd_configs.py; the tests, and the one
build per distinct predicting part they share (what it proves for each
config): tests/upstream_ssd.py.
"""
from tests import upstream_ssd

upstream_ssd.add_tests(globals(),
                       lambda path: not upstream_ssd.is_training(path))
