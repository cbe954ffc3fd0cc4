"""`python -m tests.fake_extractor_command MODULE FLAGS...`: `python -m
MODULE FLAGS...` with tests/fakes.py's Faster R-CNN feature extractor
registered as 'fake'.

For tests that start a command's process only for what happens around the
model (here XLA's clustering of a training), on the tiniest model:
tiny_faster_rcnn's config with `extractor='fake'`.
"""
import runpy
import sys

from tests import fakes

if __name__ == '__main__':
  sys.argv = sys.argv[1:]
  with fakes.fake_faster_rcnn_extractor():
    runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)
