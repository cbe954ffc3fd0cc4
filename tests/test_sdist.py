"""The sdist builds, installs into a fresh virtual environment, and runs.

The fresh environment gets the package from the sdist only (built there,
protos compiled from the sdist's protos/*.proto); its dependencies are
borrowed from the test's own environment through a .pth file, so the test
needs no network and no second TensorFlow download.
"""
import glob
import os
import site
import subprocess
import sys
import tarfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(command, **kwargs):
  result = subprocess.run(command, capture_output=True, text=True,
                          timeout=600, check=False, **kwargs)
  assert result.returncode == 0, (command, result.stderr[-3000:])
  return result.stdout


@pytest.fixture(scope='module')
def sdist(tmp_path_factory):
  out = tmp_path_factory.mktemp('dist')
  _run([sys.executable, 'setup.py', '-q', 'sdist', '-d', str(out)],
       cwd=REPO)
  (path,) = glob.glob(str(out / 'od_estimator-*.tar.gz'))
  return path


def test_sdist_carries_the_schema_and_samples(sdist):
  with tarfile.open(sdist) as archive:
    names = {name.split('/', 1)[1] for name in archive.getnames()
             if '/' in name}
  assert 'protos/pipeline.proto' in names
  assert 'samples/configs/ssd_mobilenet_v2_shapes.config' in names
  assert 'samples/cloud/cluster.yaml' in names
  assert 'samples/scripts/run_inference_tutorial.py' in names
  assert 'setup.py' in names


def test_installs_into_a_fresh_venv_and_model_main_runs(sdist, tmp_path):
  venv = tmp_path / 'venv'
  # No pip of its own (ensurepip is most of a venv's making): this
  # environment's pip installs into it (pip --python).
  _run([sys.executable, '-m', 'venv', '--without-pip', str(venv)])
  python = str(venv / 'bin' / 'python')
  fresh_site = _run([python, '-c', 'import site; '
                     'print(site.getsitepackages()[0])']).strip()
  # Dependencies (and the build's grpcio-tools) from this environment.
  with open(os.path.join(fresh_site, 'borrowed_deps.pth'), 'w') as f:
    f.write('\n'.join(site.getsitepackages()) + '\n')
  _run([sys.executable, '-m', 'pip', '--python', python, 'install', '-q',
        '--no-deps', '--no-build-isolation', sdist], cwd=str(tmp_path))
  # Where the package is found, without importing it (TensorFlow): the
  # --helpfull run below imports it, and the generated protos, from there.
  where = _run([python, '-c', 'import importlib.util; print(importlib.util.'
                'find_spec("od_estimator").submodule_search_locations[0])'],
               cwd=str(tmp_path)).strip()
  assert where.startswith(fresh_site), where
  assert os.path.exists(os.path.join(where, 'protos', 'pipeline_pb2.py'))
  # absl ends --help and --helpfull with exit status 1, as the original.
  helpfull = subprocess.run(
      [python, '-m', 'od_estimator.model_main', '--helpfull'],
      capture_output=True, text=True, timeout=600, cwd=str(tmp_path),
      check=False).stdout
  assert 'Traceback' not in helpfull
  assert '--pipeline_config_path' in helpfull
  assert '--sample_1_of_n_eval_examples' in helpfull
