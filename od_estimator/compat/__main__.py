"""`python -m od_estimator.compat run SCRIPT.py [ARGS...]`."""
import sys

from od_estimator import compat

if __name__ == '__main__':
  sys.exit(compat.main())
