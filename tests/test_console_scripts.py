"""Every console script setup.py declares is installed and answers --help.

Each installed script (pip's wrapper) runs in this process
(tests/command_modules.run_console_script); one of them also runs as a
process of its own, to show a script starts from the shell.
"""
import importlib.metadata
import os
import subprocess
import sys

import pytest

from tests import command_modules
from tests.command_modules import run_console_script

SCRIPTS = sorted(
    entry for entry in importlib.metadata.entry_points(group='console_scripts')
    if entry.value.startswith('od_estimator.'))
# The original's commands, under their original names.
ORIGINAL_COMMANDS = {'model_main', 'model_main_tf2', 'model_tpu_main',
                     'exporter_main_v2', 'export_tflite_graph_tf2',
                     'export_inference_graph',
                     'export_tflite_ssd_graph', 'create_coco_tf_record',
                     'create_pascal_tf_record',
                     # The Context R-CNN tools (Beam pipelines).
                     'create_cococameratraps_tfexample_main',
                     'add_context_to_examples', 'generate_detection_data',
                     'generate_embedding_data'}


def _installed(entry):
  return os.path.join(os.path.dirname(sys.executable), entry.name)


def test_the_original_commands_are_installed():
  assert ORIGINAL_COMMANDS <= {entry.name for entry in SCRIPTS}


@pytest.mark.parametrize('entry', SCRIPTS, ids=lambda e: e.name)
def test_script_answers_help(entry):
  done = run_console_script(_installed(entry),
                            entry.module[len('od_estimator.'):], ['--help'])
  assert done.returncode == 0, done.stderr[-2000:]
  assert 'Traceback' not in done.stderr
  assert '--' in done.stdout + done.stderr  # lists its flags


def test_a_script_answers_help_as_a_process():
  script = _installed(next(entry for entry in SCRIPTS
                           if entry.name == 'model_main'))
  done = subprocess.run([script, '--help'], capture_output=True, text=True,
                        timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  assert 'Traceback' not in done.stderr
  assert '--pipeline_config_path' in done.stdout


def test_help_lists_shared_flags_whichever_command_ran_before():
  """Commands run in one process share absl's flags; a flag two of them
  define (--pipeline_config_path) is listed by each one's --help."""
  for module in ('model_tpu_main', 'model_main', 'model_tpu_main'):
    result = command_modules.run_command(module, ['--help'])
    assert '--pipeline_config_path:' in result.stdout, module
