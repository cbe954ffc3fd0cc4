r"""Time to accuracy: `make demo` end to end, its wall time and mAP@.5.

Runs `make demo` in the repository (data, validate, train with evaluation,
export, detect), takes the COCO numbers model_main prints at the end.
With --bfloat16: the demo's training with evaluation alone, as `make demo`
runs it but with model_main --bfloat16, on the data `make demo` made (run
`make demo` first), into a model directory of its own (item 11's mAP@.5
against float32's).

  .venv/bin/python bench/demo_time.py [--bfloat16]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The Makefile's DEMO_CONFIG.
DEMO_CONFIG = 'samples/configs/ssd_mobilenet_v2_shapes.config'



def _metric(output, name):
  found = re.findall(r'^\s+%s\s+([-0-9.]+)$' % re.escape(name), output,
                     re.MULTILINE)
  return float(found[-1]) if found else None


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--json', action='store_true')
  parser.add_argument('--bfloat16', action='store_true',
                      help='Train and evaluate the demo with model_main '
                           '--bfloat16 (after make demo: its data).')
  args = parser.parse_args(argv)
  start = time.perf_counter()
  if args.bfloat16:
    model_dir = os.path.join(REPO, 'demo_out', 'model_bfloat16')
    shutil.rmtree(model_dir, ignore_errors=True)
    command = [sys.executable, '-m', 'od_estimator.model_main',
               '--pipeline_config_path=' + DEMO_CONFIG,
               '--model_dir=' + model_dir, '--save_checkpoints_steps=500',
               '--log_every_n_steps=100', '--bfloat16']
  else:
    command = ['make', '-s', 'demo']
  result = subprocess.run(command, cwd=REPO, check=False,
                          capture_output=True, text=True)
  seconds = time.perf_counter() - start
  if result.returncode:
    print(result.stdout[-2000:], result.stderr[-3000:], file=sys.stderr)
  print('make demo%s:' % (' (training with --bfloat16)' if args.bfloat16
                           else ''))
  common.report({
      'exit_code': result.returncode,
      'wall_s': seconds,
      'mAP@.5': _metric(result.stdout,
                        'DetectionBoxes_Precision/mAP@.50IOU'),
      'mAP': _metric(result.stdout, 'DetectionBoxes_Precision/mAP'),
      'annotated_image': not args.bfloat16 and os.path.exists(os.path.join(
          REPO, 'demo_out', 'detections', 'shapes_0_detections.png')),
  }, args.json)
  return result.returncode


if __name__ == '__main__':
  sys.exit(main())
