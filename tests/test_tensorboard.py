"""TensorBoard from the project's environment starts and serves a model_dir.

TensorBoard 2.15 imports pkg_resources at start-up; setup.py pins a
setuptools that still ships it. This starts the venv's `tensorboard` on a
directory holding one events file and reads its run list over HTTP.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import tensorflow as tf

# TensorBoard needs a few seconds to import TensorFlow on a busy machine.
_START_DEADLINE_SECS = 120


# `--port=0`: TensorBoard binds a port the kernel picks (no race with other
# processes over a port chosen in advance) and reports it on this line.
_SERVING = re.compile(r'TensorBoard \S+ at http://127\.0\.0\.1:(\d+)/')


def _write_events(logdir):
  with tf.Graph().as_default():
    writer = tf.compat.v1.summary.FileWriter(logdir)
    summary = tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag='Loss/total_loss', simple_value=1.5)])
    writer.add_summary(summary, global_step=1)
    writer.close()


def _get_json(url):
  with urllib.request.urlopen(url, timeout=5) as response:
    return json.loads(response.read().decode('utf-8'))


def test_tensorboard_serves_the_model_dir(tmp_path):
  tensorboard = os.path.join(os.path.dirname(sys.executable), 'tensorboard')
  if not os.path.exists(tensorboard):
    pytest.skip('no tensorboard script next to %s' % sys.executable)
  _write_events(str(tmp_path / 'model' / 'eval_0'))
  log_path = tmp_path / 'tensorboard.log'
  log = open(log_path, 'wb')
  process = subprocess.Popen(
      [tensorboard, '--logdir=%s' % (tmp_path / 'model'),
       '--host', '127.0.0.1', '--port=0'],
      stdout=log, stderr=subprocess.STDOUT)
  runs = None
  try:
    deadline = time.monotonic() + _START_DEADLINE_SECS
    while time.monotonic() < deadline and process.poll() is None:
      serving = _SERVING.search(log_path.read_text(errors='replace'))
      if serving:
        try:
          runs = _get_json('http://127.0.0.1:%s/data/runs' % serving.group(1))
        except (urllib.error.URLError, ConnectionError, OSError):
          runs = None
        if runs:
          break
      time.sleep(0.5)
  finally:
    process.terminate()
    process.wait(timeout=30)
    log.close()
  output = log_path.read_text(errors='replace')
  assert runs == ['eval_0'], output[-2000:]
