"""Every console script setup.py declares is installed and answers --help."""
import importlib.metadata
import os
import subprocess
import sys

import pytest

SCRIPTS = sorted(
    entry for entry in importlib.metadata.entry_points(group='console_scripts')
    if entry.value.startswith('od_estimator.'))
# The original's commands, under their original names.
ORIGINAL_COMMANDS = {'model_main', 'model_tpu_main', 'export_inference_graph',
                     'export_tflite_ssd_graph', 'create_coco_tf_record',
                     'create_pascal_tf_record'}


def test_the_original_commands_are_installed():
  assert ORIGINAL_COMMANDS <= {entry.name for entry in SCRIPTS}


@pytest.mark.parametrize('entry', SCRIPTS, ids=lambda e: e.name)
def test_script_answers_help(entry):
  script = os.path.join(os.path.dirname(sys.executable), entry.name)
  done = subprocess.run([script, '--help'], capture_output=True, text=True,
                        timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  assert 'Traceback' not in done.stderr
  assert '--' in done.stdout + done.stderr  # lists its flags
