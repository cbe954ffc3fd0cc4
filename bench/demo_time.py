r"""Time to accuracy: `make demo` end to end, its wall time and mAP@.5.

Runs `make demo` in the repository (data, validate, train with evaluation,
export, detect), takes the COCO numbers model_main prints at the end.

  .venv/bin/python bench/demo_time.py
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _metric(output, name):
  found = re.findall(r'^\s+%s\s+([-0-9.]+)$' % re.escape(name), output,
                     re.MULTILINE)
  return float(found[-1]) if found else None


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--json', action='store_true')
  args = parser.parse_args(argv)
  start = time.perf_counter()
  result = subprocess.run(['make', '-s', 'demo'], cwd=REPO, check=False,
                          capture_output=True, text=True)
  seconds = time.perf_counter() - start
  if result.returncode:
    print(result.stdout[-2000:], result.stderr[-3000:], file=sys.stderr)
  print('make demo:')
  common.report({
      'exit_code': result.returncode,
      'wall_s': seconds,
      'mAP@.5': _metric(result.stdout,
                        'DetectionBoxes_Precision/mAP@.50IOU'),
      'mAP': _metric(result.stdout, 'DetectionBoxes_Precision/mAP'),
      'annotated_image': os.path.exists(os.path.join(
          REPO, 'demo_out', 'detections', 'shapes_0_detections.png')),
  }, args.json)
  return result.returncode


if __name__ == '__main__':
  sys.exit(main())
