r"""Time to accuracy: `make demo` end to end, its wall time and mAP@.5.

Runs `make demo` in the repository (data, validate, train with evaluation,
export, detect), takes the COCO numbers model_main prints at the end.
After `make demo` (its data and checkpoint), item 11's two bfloat16
figures:
  --bfloat16_eval: model_main's evaluation alone (--checkpoint_dir,
    --run_once, --bfloat16) of the checkpoint `make demo` trained in float32,
    the one its own float32 evaluation scored: the difference is bfloat16
    inference alone (~30 s).
  --bfloat16: the demo's training with evaluation, as `make demo` runs it but
    with model_main --bfloat16, into a model directory of its own: another
    training path, so its difference from `make demo` mixes bfloat16 with
    the demo's run-to-run spread (bench/NOTES.md, item 11).

  .venv/bin/python bench/demo_time.py [--bfloat16 | --bfloat16_eval]
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
  parser.add_argument('--bfloat16_eval', action='store_true',
                      help='Evaluate make demo\'s float32 checkpoint with '
                           'model_main --bfloat16 (after make demo).')
  args = parser.parse_args(argv)
  if args.bfloat16 and args.bfloat16_eval:
    parser.error('--bfloat16 and --bfloat16_eval are two items: one a run.')
  start = time.perf_counter()
  model_main = [sys.executable, '-m', 'od_estimator.model_main',
                '--pipeline_config_path=' + DEMO_CONFIG, '--bfloat16']
  if args.bfloat16:
    model_dir = os.path.join(REPO, 'demo_out', 'model_bfloat16')
    command = model_main + ['--model_dir=' + model_dir,
                            '--save_checkpoints_steps=500',
                            '--log_every_n_steps=100']
  elif args.bfloat16_eval:
    model_dir = os.path.join(REPO, 'demo_out', 'eval_bfloat16')
    command = model_main + [
        '--model_dir=' + model_dir, '--run_once',
        '--checkpoint_dir=' + os.path.join(REPO, 'demo_out', 'model')]
  else:
    model_dir, command = None, ['make', '-s', 'demo']
  if model_dir:
    shutil.rmtree(model_dir, ignore_errors=True)
  result = subprocess.run(command, cwd=REPO, check=False,
                          capture_output=True, text=True)
  seconds = time.perf_counter() - start
  if result.returncode:
    print(result.stdout[-2000:], result.stderr[-3000:], file=sys.stderr)
  print('make demo%s:' % (
      ' (training with --bfloat16)' if args.bfloat16 else
      ' (its checkpoint evaluated with --bfloat16)' if args.bfloat16_eval
      else ''))
  common.report({
      'exit_code': result.returncode,
      'wall_s': seconds,
      'mAP@.5': _metric(result.stdout,
                        'DetectionBoxes_Precision/mAP@.50IOU'),
      'mAP': _metric(result.stdout, 'DetectionBoxes_Precision/mAP'),
      'annotated_image': not model_dir and os.path.exists(os.path.join(
          REPO, 'demo_out', 'detections', 'shapes_0_detections.png')),
  }, args.json)
  return result.returncode


if __name__ == '__main__':
  sys.exit(main())
