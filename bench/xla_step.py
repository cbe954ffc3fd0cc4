r"""The training step of bench/train_step.py compiled with XLA (--xla).

The same measurement with XLA auto-clustering switched on for every session
of the process, as model_main --xla does it (od_estimator/estimator/xla.py: the
fusible ops, and on CPU --tf_xla_cpu_global_jit); run_all.py sets it next
to train_step.py's figure without XLA.

  .venv/bin/python bench/xla_step.py --mode=estimator --data_dir=/tmp/d
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from od_estimator.estimator import xla
import train_step  # pylint: disable=g-import-not-at-top,wrong-import-position

if __name__ == '__main__':
  # ON_1 for every session (the Estimator's included), as the session
  # config of model_main --xla sets it for its own.
  os.environ['TF_XLA_FLAGS'] = (
      os.environ.get('TF_XLA_FLAGS', '') + ' --tf_xla_auto_jit=1').strip()
  xla.add_xla_flags()
  sys.exit(train_step.main())
