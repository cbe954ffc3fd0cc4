"""A real TF_CONFIG cluster on localhost runs model_main's train_and_evaluate.

Chief, worker, parameter server and evaluator are separate processes, as on
a real cluster. All but the parameter server exit on their own; parameter
servers serve until they are stopped (Estimator's design), so the test
stops it once the others are done, as a cluster manager would.

The tasks run the tiniest model (tiny_faster_rcnn's, 1x1-conv extractor,
through tests/fake_extractor_command.py). Between-graph replication, the
parameter server and the evaluator are the Estimator's and do not depend
on the model, so one cluster covers every family: the two-stage model's own
distributed paths run in tests/test_mirrored_strategy_two_stage.py and
model_main_tf2's two workers (tests/test_model_main_tf2.py).
"""
import dataclasses
import glob
import json
import os
import signal
import subprocess
import time

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from od_estimator.input_pipeline import inputs
from tests import local_ports
from tests import plain_command
from tests import tiny_faster_rcnn
from tests import tiny_ssd

# Generous: on a 2-core machine also busy with other work, a run took 6 min.
DEADLINE_SECS = 600
FINISHING_TASKS = ('chief', 'worker', 'evaluator')


# A worker skips training when the chief has finished by the time it starts
# (5 s after its launch, TensorFlow's delay): the chief is launched once
# the worker has started training (WORKER_STARTED), so a few steps do.
TRAIN_STEPS = 4
# The worker's line once it has checked the model_dir's step and builds its
# training input; it then waits for the chief to initialize the variables.
WORKER_STARTED = 'Input pipeline 1 of 2 reads'



# Only parsed, never connected to.
CLUSTER = {'chief': ['host0:1'], 'worker': ['host1:1', 'host2:1'],
           'ps': ['host3:1']}


@pytest.mark.parametrize('task_type, index, expected', [
    ('chief', 0, (3, 0)), ('worker', 0, (3, 1)), ('worker', 1, (3, 2)),
    ('ps', 0, None), ('evaluator', 0, None)])
def test_worker_input_context(monkeypatch, task_type, index, expected):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': CLUSTER, 'task': {'type': task_type, 'index': index}}))
  context = inputs.worker_input_context(tf.estimator.RunConfig())
  if expected is None:
    assert context is None
  else:
    assert (context.num_input_pipelines,
            context.input_pipeline_id) == expected
    # Between-graph replication: every task keeps the full batch size.
    assert context.get_per_replica_batch_size(8) == 8


def test_no_input_context_outside_a_cluster(monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  assert inputs.worker_input_context(tf.estimator.RunConfig()) is None
  assert inputs.worker_input_context(None) is None


def _launch(task_type, cluster, args, log_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', TF_CONFIG=json.dumps({
      'cluster': cluster, 'task': {'type': task_type, 'index': 0}}))
  with open(log_path, 'w') as log:
    return subprocess.Popen(
        plain_command.command('tests.fake_extractor_command') +
        ['od_estimator.model_main'] + args, env=env,
        stdout=log, stderr=subprocess.STDOUT, cwd=tiny_ssd.REPO)


def _read(path):
  with open(path) as f:
    return f.read()


def _final_step(model_dir):
  """The step of the newest checkpoint in model_dir (None without one)."""
  steps = [int(path.split('-')[-1][:-len('.index')]) for path in
           glob.glob(os.path.join(model_dir, 'model.ckpt-*.index'))]
  return max(steps) if steps else None


def _scalars(directory, tag):
  """[(step, value)] of a scalar summary in a directory's event files."""
  points = []
  for path in glob.glob(os.path.join(directory, 'events.out.tfevents.*')):
    accumulator = event_accumulator.EventAccumulator(path)
    accumulator.Reload()
    if tag in accumulator.Tags()['scalars']:
      points += [(e.step, e.value) for e in accumulator.Scalars(tag)]
  return sorted(points)


@dataclasses.dataclass(frozen=True)
class _Run:
  """What one cluster run left.

  Attributes:
    train_steps: its --num_train_steps.
    model_dir: its --model_dir.
    logs: {task: log text}.
    stragglers: the finishing tasks still running at the deadline.
    codes: {task: exit code}.
    ps_served: whether the ps still served once the others were done.
  """
  train_steps: int
  model_dir: str
  logs: dict
  stragglers: list
  codes: dict
  ps_served: bool


@pytest.fixture(scope='module')
def cluster_run(tmp_path_factory):
  """Runs the cluster; returns its _Run."""
  root = tmp_path_factory.mktemp('cluster')
  config = tiny_faster_rcnn.write_config(root, root / 'data',
                                         extractor='fake')
  model_dir = str(root / 'model')
  with local_ports.reserved(3) as ports:
    chief, worker, ps = ['localhost:%d' % port for port in ports]
    cluster = {'chief': [chief], 'worker': [worker], 'ps': [ps]}
    args = ['--pipeline_config_path=%s' % config,
            '--model_dir=%s' % model_dir,
            '--num_train_steps=%d' % TRAIN_STEPS,
            '--log_every_n_steps=1', '--eval_throttle_secs=2',
            # Each evaluation on the first validation image only.
            '--sample_1_of_n_eval_examples=8']
    logs = {task: str(root / ('%s.log' % task))
            for task in ('ps',) + FINISHING_TASKS}
    processes = {task: _launch(task, cluster, args, logs[task])
                 for task in ('ps', 'worker', 'evaluator')}
    deadline = time.monotonic() + DEADLINE_SECS
    try:
      while (time.monotonic() < deadline and
             processes['worker'].poll() is None and
             WORKER_STARTED not in _read(logs['worker'])):
        time.sleep(0.5)
      processes['chief'] = _launch('chief', cluster, args, logs['chief'])
      while time.monotonic() < deadline and any(
          processes[task].poll() is None for task in FINISHING_TASKS):
        time.sleep(1)
    finally:
      stragglers = [task for task in FINISHING_TASKS
                    if task in processes and processes[task].poll() is None]
      ps_served = processes['ps'].poll() is None
      # The parameter server never returns on its own: stopping it is the
      # normal end of a cluster run, not a failure. SIGTERM, as a cluster
      # manager sends, must end it at once.
      for process in processes.values():
        if process.poll() is None:
          process.send_signal(signal.SIGTERM)
      for process in processes.values():
        try:
          process.wait(timeout=30)
        except subprocess.TimeoutExpired:
          process.kill()
          process.wait()
  return _Run(
      TRAIN_STEPS, model_dir,
      {task: _read(path) for task, path in logs.items()}, stragglers,
      {task: processes[task].returncode if task in processes else None
       for task in logs},
      ps_served)


def _tail(text):
  return text[-3000:]


def test_every_task_but_ps_exits_on_its_own(cluster_run):
  logs = cluster_run.logs
  # Serves until stopped, by design.
  assert cluster_run.ps_served, _tail(logs['ps'])
  assert not cluster_run.stragglers, 'killed after %d s: %s\n%s' % (
      DEADLINE_SECS, cluster_run.stragglers,
      '\n'.join(_tail(logs[task]) for task in cluster_run.stragglers))
  for task in FINISHING_TASKS:
    assert cluster_run.codes[task] == 0, (task, _tail(logs[task]))


def test_sigterm_ends_the_ps(cluster_run):
  # Killed instead (-SIGKILL) when it ignored SIGTERM: it serves inside
  # TensorFlow's server.join(), where a Python handler never runs.
  assert cluster_run.codes['ps'] == -signal.SIGTERM, (
      _tail(cluster_run.logs['ps']))


def test_chief_writes_the_final_checkpoint(cluster_run):
  model_dir, logs = cluster_run.model_dir, cluster_run.logs
  # Chief and worker update the parameters asynchronously, so the last step
  # may pass num_train_steps by the steps already under way.
  final_step = _final_step(model_dir)
  assert final_step and final_step >= cluster_run.train_steps, (
      _tail(logs['chief']))
  assert os.path.exists(os.path.join(model_dir, 'pipeline.config'))
  assert 'Loss for final step' in logs['chief']
  assert 'Loss for final step' in logs['worker']


def test_training_tasks_read_their_own_file_shard(cluster_run):
  logs = cluster_run.logs
  # Two training tasks and two train files: each reads one.
  for task, index in (('chief', 0), ('worker', 1)):
    assert 'Input pipeline %d of 2 reads 1 of these' % index in logs[task], (
        _tail(logs[task]))
  assert 'Input pipeline' not in logs['evaluator']


def test_evaluator_writes_metrics_of_the_final_checkpoint(cluster_run):
  model_dir, logs = cluster_run.model_dir, cluster_run.logs
  points = _scalars(os.path.join(model_dir, 'eval_0'),
                    'DetectionBoxes_Precision/mAP')
  # The evaluator stops after a checkpoint whose global step reached
  # num_train_steps. That may be the chief's first one: it is named after
  # the step when the chief began saving, while the worker, already
  # training, can finish every step before the save does.
  assert points and points[-1][0] >= cluster_run.train_steps, (
      points, _tail(logs['evaluator']))
  assert glob.glob(os.path.join(model_dir, 'export', 'Servo', '*',
                                'saved_model.pb'))
