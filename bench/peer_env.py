"""The peers' own environments and their RESULT lines (items 7-10).

A peer (Model Garden, the original's TF2 trainer) runs in a virtual
environment the bench makes for itself on first use, never a project
dependency; its step script prints one `RESULT {json}` line. This module
imports nothing but the standard library: the peers' step scripts use it in
their own environments.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time


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


def add_round_args(parser, steps):
  """The flags of a driver that alternates a peer and ours."""
  parser.add_argument('--steps', type=int, default=steps)
  parser.add_argument('--rounds', type=int, default=1,
                      help='The peer then ours, this many times in turn: '
                           'the ratios are medians over the rounds.')
  parser.add_argument('--ours', default=None,
                      help='Our side as measured earlier in the same run '
                           '(JSON of bench/train_step.py --mode=estimator '
                           'on the same config, records, size and batch): '
                           'only the peer is run.')


def time_steps(run_step, warmup, steps, images_a_step):
  """A peer's step script's timing: run_step() after warm-up.

  Returns (the last step's output, {images_per_s, images_per_cpu_s,
  peak_rss_mb}): rates over the timed steps, CPU time of every thread.
  """
  for _ in range(warmup):
    run_step()
  start, cpu_start = time.perf_counter(), time.process_time()
  for _ in range(steps):
    output = run_step()
  seconds = time.perf_counter() - start
  cpu_seconds = time.process_time() - cpu_start
  return output, {
      'images_per_s': steps * images_a_step / seconds,
      'images_per_cpu_s': steps * images_a_step / cpu_seconds,
      'peak_rss_mb': resource.getrusage(
          resource.RUSAGE_SELF).ru_maxrss / 1024.0}
