"""training_jobs: what the training commands share."""
import logging

from od_estimator.estimator import training_jobs
from od_estimator.utils import quiet_output


def _tf_record(message):
  return logging.LogRecord('tensorflow', logging.INFO, '/elsewhere/tf.py', 1,
                           message, None, None)


def test_training_on_a_tpu_shows_tpuestimators_lines_not_the_bar(
    monkeypatch):
  trained = []
  monkeypatch.setattr(training_jobs, 'train',
                      lambda job, parts: trained.append((job, parts)))
  monkeypatch.setattr(quiet_output._FILTER, 'facts',
                      quiet_output._FILTER.facts)
  job = training_jobs.Job('pipeline.config', num_train_steps=7,
                          log_every_n_steps=5)
  training_jobs.train_on_tpu(job, {'estimator': None})
  [(tpu_job, parts)] = trained
  assert tpu_job.log_every_n_steps == 0
  assert tpu_job.num_train_steps == 7 and parts == {'estimator': None}
  assert quiet_output._FILTER.filter(_tf_record('loss = 0.5, step = 3'))
  assert quiet_output._FILTER.filter(_tf_record('global_step/sec: 2.1'))
  assert not quiet_output._FILTER.filter(_tf_record('Calling model_fn.'))
