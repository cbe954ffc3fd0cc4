"""Shared pytest fixtures: run graph-mode TF code and get numpy results.

The original's sample configs (test data this repository does not ship):
take the `upstream_configs` fixture (or `upstream_configs_tf2` for the
TF2-era ones), the folder's path; the test skips with one reason line when
the folder is absent. It is $OD_UPSTREAM_CONFIGS (or
$OD_UPSTREAM_CONFIGS_TF2), else ../shared/upstream_configs(_tf2) next to
the repository. To parametrize over every config of the folder, use
`@pytest.mark.parametrize('path', upstream_folder.params())` of
tests/upstream_folder.py; never a fixed list of names.
"""
import collections
import os

# First: importing od_estimator imports TensorFlow without collecting.
from od_estimator.utils import gc_tuning
import numpy as np
import pytest
import tensorflow as tf

from tests import fakes
from tests import fast_graphs
from tests import fork_server
from tests import plain_session
from tests import tiny_resnet
from tests import trained_models
from tests import upstream_folder

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# The tests' processes build graphs as the commands do (utils/gc_tuning.py).
gc_tuning.for_graph_building()
# The tests' own sessions run without grappler (see tests/plain_session.py).
plain_session.without_grappler()

# The tiny models trained and exported once per run (tests/trained_models.py).
one_step_tiny_ssd = trained_models.one_step_tiny_ssd
one_step_tiny_ssd_export = trained_models.one_step_tiny_ssd_export
overfit_faster_rcnn = trained_models.overfit_faster_rcnn
overfit_mask_rcnn = trained_models.overfit_mask_rcnn
overfit_rfcn = trained_models.overfit_rfcn
overfit_context_rcnn = trained_models.overfit_context_rcnn
overfit_faster_rcnn_fpn = trained_models.overfit_faster_rcnn_fpn
overfit_efficientdet = trained_models.overfit_efficientdet
averaged_tiny_ssd = trained_models.averaged_tiny_ssd
one_step_fake_faster_rcnn = trained_models.one_step_fake_faster_rcnn


@pytest.fixture(scope='session', autouse=True)
def _fork_server():
  """The command processes the tests start fork from one interpreter that
  has imported TensorFlow (tests/fork_server.py)."""
  with fork_server.serving():
    yield


# Test-only feature extractors, registered for a whole module that names
# them: pytestmark = pytest.mark.usefixtures('fake_extractor').
@pytest.fixture(scope='module')
def fake_extractor():
  """tests/fakes.py's Faster R-CNN extractor is type 'fake' (the tiniest)."""
  with fakes.fake_faster_rcnn_extractor():
    yield


@pytest.fixture(scope='module')
def tiny_resnet_extractors():
  """tests/tiny_resnet.py's extractors are registered (the two-stage
  families' runs: their exports and Estimator.predict)."""
  with tiny_resnet.registered():
    yield

# tests/durations.txt: the test modules, slowest first (a module's seconds:
# setup, call and teardown of its tests). `make test` runs `-n 3 --dist
# loadscope --no-loadscope-reorder`: each module goes whole to the next free
# worker in collection order, so the slowest start first and the workers
# finish together. (xdist's default order, most tests first, starts the
# few-test slow modules last, and one worker then runs them alone.) Modules
# the file does not list (new ones) come after those it lists. `make
# durations` runs the whole suite with --write-durations to rewrite it.
DURATIONS_FILE = os.path.join(os.path.dirname(__file__), 'durations.txt')


def pytest_addoption(parser):
  parser.addoption(
      '--write-durations', action='store_true',
      help='after the run, write tests/durations.txt: every module that ran '
      'with its seconds, slowest first (run it on the whole suite)')


def _module(nodeid):
  return nodeid.split('::', 1)[0]


def _read_durations():
  """The modules of the durations file, slowest first."""
  with open(DURATIONS_FILE) as lines:
    return [line.split()[0] for line in lines
            if line.strip() and not line.startswith('#')]


def pytest_collection_modifyitems(items):
  """Puts the modules in durations.txt's order; unlisted ones follow."""
  rank = {module: index for index, module in enumerate(_read_durations())}
  items.sort(key=lambda item: rank.get(_module(item.nodeid), len(rank)))


def pytest_configure(config):
  if config.getoption('write_durations'):
    config.pluginmanager.register(_DurationsWriter(), 'durations_writer')


class _DurationsWriter:
  """Sums each module's test durations; writes DURATIONS_FILE at the end.

  Runs in the controller: under pytest-xdist every report reaches it.
  """

  def __init__(self):
    self._seconds = collections.defaultdict(float)

  def pytest_runtest_logreport(self, report):
    self._seconds[_module(report.nodeid)] += report.duration

  def pytest_sessionfinish(self, session):
    if hasattr(session.config, 'workerinput'):
      return  # A worker: the controller writes the file.
    with open(DURATIONS_FILE, 'w') as out:
      out.write('# Written by `make durations` (pytest --write-durations): '
                'module, seconds.\n')
      for module, seconds in sorted(self._seconds.items(),
                                    key=lambda entry: -entry[1]):
        out.write('%s %.1f\n' % (module, seconds))


def _execute(graph_fn, inputs=(), dynamic=False):
  """Builds `graph_fn(*tensors)` in a fresh graph and runs it once.

  The graph is built with identity hashing (tests/fast_graphs.py).

  Args:
    graph_fn: function of tensors returning a tensor or a nested structure
      of tensors.
    inputs: numpy arrays fed as the function's arguments.
    dynamic: when True the inputs are placeholders with unknown dimensions,
      to exercise the code's dynamic-shape path; otherwise constants.

  Returns:
    graph_fn's outputs evaluated to numpy, with the same structure.
  """
  with fast_graphs.new_graph() as graph:
    feed = {}
    tensors = []
    for value in inputs:
      value = np.asarray(value)
      if dynamic:
        placeholder = tf.compat.v1.placeholder(
            tf.as_dtype(value.dtype), shape=[None] * value.ndim)
        feed[placeholder] = value
        tensors.append(placeholder)
      else:
        tensors.append(tf.constant(value))
    outputs = graph_fn(*tensors)
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      return sess.run(outputs, feed_dict=feed)


@pytest.fixture
def execute():
  """`execute(graph_fn, inputs, dynamic=False)`: see _execute."""
  return _execute


@pytest.fixture
def upstream_configs():
  """The folder of the original's TF1 sample configs; skips when absent."""
  return upstream_folder.require()


@pytest.fixture
def upstream_configs_tf2():
  """The folder of the original's TF2-era sample configs; skips if absent."""
  return upstream_folder.require(tf2=True)
