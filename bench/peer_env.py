"""The peers' own environments and their RESULT lines (items 7-10).

A peer (Model Garden, the original's TF2 trainer) runs in a virtual
environment the bench makes for itself on first use, never a project
dependency; its step script prints one `RESULT {json}` line.
"""
import json
import os
import statistics
import subprocess
import sys


def run_result(command, env=None):
  """Runs command; returns its last RESULT line's dict, raises if none."""
  out = subprocess.run(command, capture_output=True, text=True, check=False,
                       env=env)
  lines = [l for l in out.stdout.splitlines() if l.startswith('RESULT ')]
  if out.returncode or not lines:
    raise RuntimeError('%s failed: %s' % (
        os.path.basename(command[1]),
        ' | '.join(out.stderr.strip().splitlines()[-3:])))
  return json.loads(lines[-1][len('RESULT '):])


def ensure_venv(venv, installs, check):
  """Makes the virtual environment `venv` unless its python runs `check`.

  Args:
    venv: the environment's directory.
    installs: lists of `pip install` arguments, installed in turn.
    check: Python code that runs once the environment is complete.

  Returns:
    The environment's python. Raises RuntimeError if pip fails.
  """
  python = os.path.join(venv, 'bin', 'python')
  if os.path.exists(python) and subprocess.run(
      [python, '-c', check], capture_output=True, check=False).returncode == 0:
    return python
  print('installing a peer environment in %s: %s' % (
      venv, '; '.join(' '.join(args) for args in installs)), flush=True)
  subprocess.run([sys.executable, '-m', 'venv', '--clear', venv], check=True)
  for args in installs:
    install = subprocess.run([python, '-m', 'pip', 'install', '-q'] + args,
                             capture_output=True, text=True, check=False)
    if install.returncode:
      raise RuntimeError('pip install %s failed: %s' % (
          ' '.join(args), install.stderr.strip()[-500:]))
  return python


def paired(peer, ours):
  """One round's figures: {peer|ours}_{images_per_s, images_per_cpu_s,
  peak_rss_mb}."""
  return {'%s_%s' % (side, key): figures[key]
          for side, figures in (('peer', peer), ('ours', ours))
          for key in ('images_per_s', 'images_per_cpu_s', 'peak_rss_mb')}


def medians(rounds, peer_name):
  """Medians over rounds of paired() figures, the ratios ours / peer by
  wall clock and per CPU second, and a one-line summary."""
  result = {key: statistics.median(r[key] for r in rounds)
            for key in rounds[0]}
  for name, key in (('ratio', 'images_per_s'),
                    ('cpu_ratio', 'images_per_cpu_s')):
    result[name] = statistics.median(
        r['ours_' + key] / r['peer_' + key] for r in rounds)
  if len(rounds) > 1:
    result['round_ratios'] = [
        round(r['ours_images_per_s'] / r['peer_images_per_s'], 3)
        for r in rounds]
    result['round_cpu_ratios'] = [
        round(r['ours_images_per_cpu_s'] / r['peer_images_per_cpu_s'], 3)
        for r in rounds]
  result['summary'] = (
      'ours %.3g vs %s %.3g images/s: %.2fx (per CPU second %.3g vs %.3g: '
      '%.2fx)' % (result['ours_images_per_s'], peer_name,
                  result['peer_images_per_s'], result['ratio'],
                  result['ours_images_per_cpu_s'],
                  result['peer_images_per_cpu_s'], result['cpu_ratio']))
  return result
