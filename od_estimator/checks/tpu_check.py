"""Would a pipeline config train on a Cloud TPU? (`validate --check_tpu`).

Builds on CPU the training step TPUEstimator runs on each TPU core: the
train input_fn at the per-shard batch size (train batch / num_shards), and
model_fn with use_tpu=True (CrossShardOptimizer, scaffold_fn) fed with
placeholders of that input's shapes. Then it reports what would stop the
job on a TPU, before anyone pays for one:

  * a tensor of the infeed or of the step whose shape is not fully defined;
  * an op XLA cannot compile: the step is converted to XLA's HLO for the CPU
    backend (nothing runs, no machine code is generated);
  * a train batch size that does not split evenly over the shards;
  * a path a Cloud TPU cannot reach (anything but gs://);
  * a fine_tune_checkpoint that scaffold_fn cannot restore from.

The XLA conversion needs eager execution (TensorFlow 2's default).
"""
import collections
import dataclasses
import re

import tensorflow as tf
from tensorflow.python.tpu import tpu_function

from od_estimator.input_pipeline import inputs
from od_estimator.estimator import fine_tune
from od_estimator.estimator import model_lib
from od_estimator.builders import model_builder
from od_estimator.core import standard_fields as fields
from od_estimator.utils import graph_functions

GCS_PREFIX = 'gs://'
DEFAULT_NUM_SHARDS = 8  # model_tpu_main's --num_shards default.
_STEP_OUTPUT = 'tpu_step_output'
_IMPORT_SCOPE = 'step'
# Collectives only a TPU compiles. Over the single replica converted here a
# cross-replica sum is the identity, so it becomes one before conversion.
_TPU_COLLECTIVES = ('CrossReplicaSum',)
# Batch-norm kernels leave the shape of their scratch outputs (reserve
# spaces, outputs 3 and up) to the device; XLA does not use them.
_BATCH_NORM_OPS = ('FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3')
_FIRST_SCRATCH_OUTPUT = 3
_SCRATCH = '<batch-norm scratch>'
# tf2xla's "OpType (No registered 'OpType' OpKernel for XLA_CPU_JIT devices
# compatible with node {{function_node f}}{{node name}})", one per op.
_REJECTED_OP = re.compile(
    r"(\w+) \(No registered '[^']*' OpKernel for \w+ devices compatible "
    r"with node (?:\{\{function_node [^}]*\}\})?\{\{node ([^}]+)\}\}")
_NAMES_PER_LINE = 3
_NOT_BUILT = 'TPU training step not built: fix the errors above first.'
_NMS_HINT = ('non-max suppression returns a data-dependent number of boxes; '
             'in training it comes from a hard example miner '
             '(model.ssd.loss.hard_example_miner: use a '
             'weighted_sigmoid_focal classification loss instead, as the '
             "original's TPU configs (*_sync.config) do; "
             'model.faster_rcnn.hard_example_miner: remove it) or from '
             "Faster R-CNN's first stage (set model.faster_rcnn."
             'use_static_shapes: true)')
# Op types whose cause is known -> what to change.
_OP_HINTS = {
    'NonMaxSuppressionV2': _NMS_HINT,
    'NonMaxSuppressionV3': _NMS_HINT,
    'NonMaxSuppressionV5': _NMS_HINT,
    'Where': 'tf.where keeps a data-dependent number of elements; the '
             'hard example miner sums the losses of the anchors it keeps '
             '(model.ssd.loss.hard_example_miner, '
             'model.faster_rcnn.hard_example_miner: see the hint on '
             "non-max suppression), and Faster R-CNN's training step drops "
             'the anchors crossing the image border (set '
             'model.faster_rcnn.clip_anchors_to_image: true) and selects '
             'sampled proposals (set model.faster_rcnn.use_static_shapes: '
             'true)',
    # The hard example miner's batched non-max suppression.
    'RaggedRange': _NMS_HINT,
    'HistogramSummary': 'train_config.summarize_gradients adds these; set it '
                        'to false for a TPU',
    'EagerPyFunc': 'Python code (tf.py_function) cannot run on a TPU core',
    'PyFunc': 'Python code (tf.numpy_function) cannot run on a TPU core',
}


@dataclasses.dataclass(frozen=True)
class TpuOptions:
  """What `--check_tpu` checks against.

  Attributes:
    num_shards: TPU cores the train batch is split over (--num_shards).
    model_dir: the TPU job's --model_dir, or '' when not given.
    allow_local_paths: accept paths other than gs:// (local dry runs).
  """
  num_shards: int = DEFAULT_NUM_SHARDS
  model_dir: str = ''
  allow_local_paths: bool = False


@dataclasses.dataclass(frozen=True)
class _Step:
  """One TPU core's training step, built in its own graph."""
  graph: tf.Graph
  feeds: list  # Placeholders standing for the infeed.
  output: tf.Tensor  # The loss, computed after the train op.
  scaffold_fn: object
  model: object  # The DetectionModel model_fn built.


def _first_line(error):
  text = getattr(error, 'message', None) or str(error)
  return text.strip().splitlines()[0] if text.strip() else repr(error)


def _some(items):
  """The first few items, and how many more."""
  more = len(items) - _NAMES_PER_LINE
  return ', '.join(items[:_NAMES_PER_LINE]) + (
      ' and %d more' % more if more > 0 else '')


def _shape_text(shape):
  if shape.rank is None:
    return '<unknown rank>'
  return '[%s]' % ', '.join('?' if d is None else str(d)
                            for d in shape.as_list())


# ---------------------------------------------------------------------------
# Config-level checks: paths and batch size.

def _tpu_paths(configs, model_dir):
  """(where, path) of every path the TPU job reads or writes."""
  paths = [('--model_dir', model_dir)] if model_dir else []
  readers = [('train_input_reader', configs['train_input_config'])]
  readers += [('eval_input_reader[%d]' % i, reader)
              for i, reader in enumerate(configs['eval_input_configs'])]
  for field, reader in readers:
    if reader.WhichOneof('input_reader') == 'tf_record_input_reader':
      paths += [(field + '.tf_record_input_reader.input_path', path)
                for path in reader.tf_record_input_reader.input_path]
    if reader.label_map_path:
      paths.append((field + '.label_map_path', reader.label_map_path))
  checkpoint = configs['train_config'].fine_tune_checkpoint
  if checkpoint:
    paths.append(('train_config.fine_tune_checkpoint', checkpoint))
  return paths


def _check_paths(configs, options, report):
  local = [(where, path) for where, path in
           _tpu_paths(configs, options.model_dir)
           if not path.startswith(GCS_PREFIX)]
  if options.allow_local_paths:
    if local:
      report.note('--allow_local_paths: accepted %d path(s) a Cloud TPU '
                  'cannot reach (%s).' % (
                      len(local), ', '.join(where for where, _ in local)))
    return
  for where, path in local:
    problem = ('%s is not a gs:// path; Cloud TPU workers read and write '
               'only Google Cloud Storage' % path)
    flag = where.startswith('--')
    report.error(None if flag else where,
                 '%s %s' % (where, problem) if flag else problem,
                 hint='copy it to a gs:// bucket, or pass --allow_local_paths '
                 'for a local dry run')


def _per_shard_batch_size(train_config, num_shards, report):
  """train batch / num_shards, or None (reported) when it does not split."""
  if num_shards < 1:
    report.error(None, '--num_shards must be at least 1, got %d' % num_shards)
    return None
  batch_size = train_config.batch_size
  if batch_size < 1:
    return None  # validate reports it.
  if batch_size % num_shards:
    below = max(num_shards, batch_size // num_shards * num_shards)
    report.error('train_config.batch_size',
                 '%d is not divisible by --num_shards=%d; TPUEstimator '
                 'splits the batch evenly over the TPU cores' %
                 (batch_size, num_shards),
                 hint='use a multiple of %d, e.g. %d or %d' % (
                     num_shards, below, below + num_shards))
    return None
  return batch_size // num_shards


# ---------------------------------------------------------------------------
# The infeed: train_input_fn at the per-shard batch size.

def _input_shape_fix(configs, key, shape):
  """(field, hint) for an infeed tensor of unknown shape, when known."""
  if shape.rank is None:
    return None, None
  dims = shape.as_list()
  if dims[0] is None:
    return ('train_input_reader.drop_remainder',
            'set drop_remainder: true (the default) so every batch has the '
            'per-shard size')
  if key == fields.InputDataFields.image and None in dims[1:3]:
    return ('model.%s.image_resizer' % configs['model'].WhichOneof('model'),
            'use fixed_shape_resizer, or keep_aspect_ratio_resizer with '
            'pad_to_max_dimension: true')
  return None, None


def _input_specs(configs, batch_size, report):
  """(features, labels) TensorSpecs of one shard's infeed, or None."""
  input_fn = inputs.create_train_input_fn(
      configs['train_config'], configs['train_input_config'],
      configs['model'])
  try:
    with tf.Graph().as_default():
      features, labels = input_fn(
          params={'batch_size': batch_size}).element_spec
  except (ValueError, TypeError, RuntimeError, tf.errors.OpError) as error:
    report.error('train_input_reader', 'cannot build the training input: %s'
                 % _first_line(error))
    return None
  # One line per cause: (field, hint) -> ["features['image'] [?, ...]"].
  unknown = collections.OrderedDict()
  for kind, specs in (('features', features), ('labels', labels)):
    for key, spec in sorted(specs.items()):
      if not spec.shape.is_fully_defined():
        unknown.setdefault(_input_shape_fix(configs, key, spec.shape),
                           []).append('%s[%r] has shape %s' % (
                               kind, key, _shape_text(spec.shape)))
  for (field, hint), tensors in unknown.items():
    report.error(field, 'TPU infeed: %s; a TPU needs every dimension known'
                 % _some(tensors), hint=hint)
  return None if unknown else (features, labels)


# ---------------------------------------------------------------------------
# The training step.

def _build_step(configs, specs, batch_size, num_shards, load_pretrained):
  """model_fn(TRAIN) as TPUEstimator calls it on one core; returns a _Step."""
  models = []

  def detection_model_fn(is_training, add_summaries):
    models.append(model_builder.build(configs['model'], is_training,
                                      add_summaries))
    return models[-1]

  model_fn = model_lib.create_model_fn(
      detection_model_fn, configs,
      hparams={'load_pretrained': load_pretrained}, use_tpu=True)
  graph = tf.Graph()
  with graph.as_default():
    features, labels = (
        {key: tf.compat.v1.placeholder(spec.dtype, spec.shape,
                                       name='%s/%s' % (kind, key))
         for key, spec in group.items()}
        for kind, group in zip(('features', 'labels'), specs))
    # TPUEstimator's params (with use_tpu) and shard context: model_fn
    # returns a TPUEstimatorSpec and CrossShardOptimizer averages over the
    # shards.
    with tpu_function.tpu_shard_context(num_shards):
      spec = model_fn(features, labels, tf.estimator.ModeKeys.TRAIN,
                      params={'batch_size': batch_size, 'use_tpu': True})
    with tf.control_dependencies([spec.train_op]):
      output = tf.identity(spec.loss, name=_STEP_OUTPUT)
  return _Step(graph=graph,
               feeds=list(features.values()) + list(labels.values()),
               output=output, scaffold_fn=spec.scaffold_fn, model=models[-1])


def _step_ops(output):
  """The ops computing `output` (inputs and control inputs), in order."""
  needed, pending = set(), [output.op]
  while pending:
    op = pending.pop()
    if op.name not in needed:
      needed.add(op.name)
      pending.extend(tensor.op for tensor in op.inputs)
      pending.extend(op.control_inputs)
  return [op for op in output.graph.get_operations() if op.name in needed]


def dynamic_shape_origins(ops):
  """Tensors of unknown shape that do not follow from another one.

  A tensor computed, however indirectly (e.g. through tf.shape), from a
  tensor of unknown shape is that tensor's follower, not an origin.
  Batch-norm scratch outputs, and unknown shapes computed from them
  directly, are left out.

  Args:
    ops: operations in creation (topological) order.

  Returns:
    [(origin tensor, number of its followers of unknown shape)].
  """
  origin_of = {}  # Tensor name -> name of its origin, or _SCRATCH.
  origins = collections.OrderedDict()
  for op in ops:
    sources = [origin_of.get(t.name) for t in op.inputs]
    real = [source for source in sources if source not in (None, _SCRATCH)]
    for index, tensor in enumerate(op.outputs):
      known = tensor.shape.is_fully_defined()
      if real:
        origin_of[tensor.name] = real[0]
        origins[real[0]][1] += 0 if known else 1
      elif known:
        continue
      elif _SCRATCH in sources or (op.type in _BATCH_NORM_OPS and
                                   index >= _FIRST_SCRATCH_OUTPUT):
        origin_of[tensor.name] = _SCRATCH
      else:
        origin_of[tensor.name] = tensor.name
        origins[tensor.name] = [tensor, 0]
  return [tuple(entry) for entry in origins.values()]


def _check_step_shapes(step_ops, report):
  """One line per op type making tensors of unknown shape in the step."""
  by_type = collections.OrderedDict()
  for tensor, followers in dynamic_shape_origins(step_ops):
    entry = by_type.setdefault(tensor.op.type, [[], 0])
    entry[0].append('`%s` %s' % (tensor.name, _shape_text(tensor.shape)))
    entry[1] += followers
  for op_type, (tensors, followers) in by_type.items():
    report.error(None, 'TPU step: %s makes tensors of unknown shape: %s; a '
                 'TPU needs every dimension known%s' % (
                     op_type, _some(tensors),
                     ' (%d more tensor(s) computed from them)' % followers
                     if followers else ''),
                 hint=_OP_HINTS.get(op_type))


# ---------------------------------------------------------------------------
# fine_tune_checkpoint and scaffold_fn.

def _readable_checkpoint(train_config, report):
  """True when fine_tune_checkpoint is set and readable (else reported)."""
  checkpoint = train_config.fine_tune_checkpoint
  if not checkpoint:
    return False
  try:
    tf.train.load_checkpoint(checkpoint)
  except (ValueError, tf.errors.OpError) as error:
    report.error('train_config.fine_tune_checkpoint',
                 'scaffold_fn cannot restore from %s: %s' %
                 (checkpoint, _first_line(error)),
                 hint='give a checkpoint prefix (.../model.ckpt) the TPU job '
                 'can read')
    return False
  return True


def _check_restore(step, train_config, report):
  """Checks that scaffold_fn restores at least one variable, and runs it."""
  checkpoint = train_config.fine_tune_checkpoint
  field = 'train_config.fine_tune_checkpoint'
  kind = model_lib.fine_tune_checkpoint_type(train_config)
  try:
    with step.graph.as_default():
      matched = fine_tune.match_checkpoint(step.model, train_config)
      available, missing, mismatched, _ = matched
      wanted = matched.wanted
      if available:
        step.scaffold_fn()
  except (ValueError, tf.errors.OpError) as error:
    report.error(field, 'scaffold_fn cannot restore from %s: %s' %
                 (checkpoint, _first_line(error)))
    return
  if available:
    report.note('TPU: scaffold_fn restores %d of the %d variables a %r '
                'checkpoint should hold from %s.' % (len(available),
                                                     wanted, kind,
                                                     checkpoint))
    return
  if mismatched:
    name, in_checkpoint, in_model = mismatched[0]
    hint = ('%d name(s) match but with another shape, e.g. %s: %s in the '
            'checkpoint, %s in the model' % (len(mismatched), name,
                                             in_checkpoint, in_model))
  else:
    names = [name for name, _ in tf.train.list_variables(checkpoint)]
    hint = ('a "classification" checkpoint holds the backbone without the '
            "detector's scope prefix (FeatureExtractor/, or "
            'FirstStageFeatureExtractor/ and SecondStageFeatureExtractor/ '
            'for two-stage models), a "detection" one the whole model; '
            'this one holds e.g. %s' % ', '.join(names[:2]))
  report.error(field, 'scaffold_fn would restore nothing: none of the %d '
               'variables a %r checkpoint should hold (e.g. %s) is in %s' % (
                   wanted, kind, missing[0] if missing else '-',
                   checkpoint), hint=hint)


# ---------------------------------------------------------------------------
# XLA.

def _single_replica(graph_def):
  """Turns TPU-only collectives into identities, in place."""
  for node in graph_def.node:
    if node.op in _TPU_COLLECTIVES:
      node.op = 'Identity'
      del node.input[1:]  # The group assignment.
      for key in list(node.attr):
        if key != 'T':
          del node.attr[key]


def _xla_error(step, step_ops):
  """Converts the step to XLA HLO; returns the error text or None.

  The step's GraphDef, cut down to the ops computing its output, is imported
  into a function whose variables are captured (XLA cannot create them) and
  whose feeds are its arguments (utils/graph_functions).
  """
  graph_def = tf.compat.v1.graph_util.extract_sub_graph(
      step.graph.as_graph_def(), [step.output.op.name])
  _single_replica(graph_def)
  variables = {
      op.name + ':0': tf.Variable(tf.zeros(op.get_attr('shape'),
                                           op.get_attr('dtype')),
                                  trainable=False)
      for op in step_ops if op.type == 'VarHandleOp'}
  specs = [tf.TensorSpec(t.shape, t.dtype) for t in step.feeds]
  step_fn = graph_functions.function_of_graph_def(
      graph_def, [t.name for t in step.feeds], specs, step.output.name,
      captured=variables, scope=_IMPORT_SCOPE)
  compiled = tf.function(lambda *args: step_fn(*args), jit_compile=True)
  try:
    compiled.experimental_get_compiler_ir(*specs)(stage='hlo')
  except (ValueError, tf.errors.OpError) as error:
    return str(error)
  return None


def _summary_ops(step):
  """Summary ops model_fn added: a TPU step cannot compute them.

  They hang off the step (nothing it returns needs them), so the XLA
  conversion of the step's outputs does not meet them; on a TPU they
  would sit inside the replicated computation.
  """
  return [tensor.op for tensor in
          step.graph.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)]


def _rejected_ops(summary_ops, xla_error):
  """({op type: [node names]}, XLA error text no op could be read from)."""
  rejected = collections.OrderedDict()

  def add(op_type, name):
    if name.startswith(_IMPORT_SCOPE + '/'):
      name = name[len(_IMPORT_SCOPE) + 1:]
    names = rejected.setdefault(op_type, [])
    if name not in names:
      names.append(name)

  for op in summary_ops:
    add(op.type, op.name)
  found = _REJECTED_OP.findall(xla_error or '')
  for op_type, name in found:
    add(op_type, name)
  unread = None if found or not xla_error else xla_error.replace(
      "Failed getting HLO text: '", '', 1)
  return rejected, unread


def _report_rejected(rejected, unread, report):
  for op_type, names in rejected.items():
    report.error(None, 'XLA cannot compile %s ops in the TPU training step: '
                 '%s' % (op_type, _some(['`%s`' % name for name in names])),
                 hint=_OP_HINTS.get(op_type))
  if unread:
    report.error(None, 'XLA cannot compile the TPU training step: %s' %
                 _first_line(unread))


# ---------------------------------------------------------------------------

def check(configs, options, report):
  """Adds to `report` what would fail on a Cloud TPU; see the module doc.

  The step is built only when `report` has no error yet (the config's own
  problems come first) and the batch splits over the shards.

  Args:
    configs: a configs dict (config_util).
    options: TpuOptions.
    report: a config_check.Report (error(field, problem, hint), note(text)).
  """
  errors_before = len(report.errors)
  _check_paths(configs, options, report)
  batch_size = _per_shard_batch_size(configs['train_config'],
                                     options.num_shards, report)
  if errors_before or batch_size is None:
    report.note(_NOT_BUILT)
    return
  specs = _input_specs(configs, batch_size, report)
  if specs is None:
    report.note(_NOT_BUILT)
    return
  train_config = configs['train_config']
  restore = _readable_checkpoint(train_config, report)
  try:
    step = _build_step(configs, specs, batch_size, options.num_shards,
                       restore)
  except (ValueError, TypeError, NotImplementedError,
          tf.errors.OpError) as error:
    report.error(None, 'cannot build the TPU training step: %s' %
                 _first_line(error))
    return
  step_ops = _step_ops(step.output)
  _check_step_shapes(step_ops, report)
  if restore:
    _check_restore(step, train_config, report)
  _report_rejected(*_rejected_ops(_summary_ops(step),
                                  _xla_error(step, step_ops)), report)
  if len(report.errors) == errors_before:
    report.note('TPU: batch %d = %d shard(s) x %d; the infeed and the %d '
                'ops of the training step have static shapes, and XLA '
                'compiles the step.' % (train_config.batch_size,
                                        options.num_shards, batch_size,
                                        len(step_ops)))
