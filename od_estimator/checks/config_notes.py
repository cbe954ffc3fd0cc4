"""Notes on a pipeline config: fields without effect, and advice.

`validate` and the training commands print these as `note:` lines. A note
never stops a launch; it tells the user that a field they set does nothing
here (and what to use instead), or that a setting is known to give poor
results in the way they train.

NO_EFFECT_FIELDS is the one list of TrainConfig, EvalConfig and InputReader
fields that parse but change nothing in od_estimator. It came from an audit
of train.proto, eval.proto and input_reader.proto, field by field, against
what the code reads. Most were read only by the original's legacy
`train.py` / `eval.py` (queue-based input, SyncReplicasOptimizer, a polling
evaluation loop), which model_main.py replaced there too. Our own
`od_estimator.legacy.train` / `.eval` honour some of them: for those commands
(HONOURED_BY_COMMAND) they get no note.
"""

# (configs key, field) -> why it has no effect and what to use instead.
NO_EFFECT_FIELDS = {
    # TrainConfig.
    ('train_config', 'sync_replicas'): (
        "used only by the original's legacy train.py; model_main.py trains a "
        'TF_CONFIG cluster asynchronously (one machine with several GPUs: '
        'model_main --num_gpus, synchronous)'),
    ('train_config', 'replicas_to_aggregate'): (
        "used only by the original's legacy train.py with sync_replicas"),
    ('train_config', 'startup_delay_steps'): (
        "used only by the original's legacy train.py"),
    ('train_config', 'batch_queue_capacity'): (
        "used only by the original's legacy queue-based train.py; the input "
        'is a tf.data pipeline (see the input reader\'s num_prefetch_batches)'),
    ('train_config', 'num_batch_queue_threads'): (
        "used only by the original's legacy queue-based train.py; see the "
        "input reader's num_parallel_batches"),
    ('train_config', 'prefetch_queue_capacity'): (
        "used only by the original's legacy queue-based train.py; see the "
        "input reader's num_prefetch_batches"),
    ('train_config', 'max_number_of_boxes'): (
        'deprecated; set train_input_reader.max_number_of_boxes instead'),
    ('train_config', 'fine_tune_checkpoint_version'): (
        'the checkpoint format (TF1 names or TF2 object graph) is read from '
        'the checkpoint itself'),
    ('train_config', 'run_fine_tune_checkpoint_dummy_computation'): (
        "used only by the original's TF2 (Keras) training loop; in graph "
        'mode every variable exists before the checkpoint is restored'),
    # EvalConfig.
    ('eval_config', 'num_examples'): (
        "used only by the original's legacy eval.py; each eval input is "
        'read once to its end (fewer: --sample_1_of_n_eval_examples)'),
    ('eval_config', 'max_evals'): (
        "used only by the original's legacy eval.py; model_main evaluates "
        'each new checkpoint until training ends (once: --run_once)'),
    ('eval_config', 'eval_interval_secs'): (
        "used only by the original's legacy eval.py; see model_main "
        '--eval_throttle_secs'),
    ('eval_config', 'save_graph'): (
        "used only by the original's legacy eval.py"),
    ('eval_config', 'visualization_export_dir'): (
        "used only by the original's legacy eval.py"),
    ('eval_config', 'eval_master'): (
        "used only by the original's legacy eval.py"),
    ('eval_config', 'export_path'): (
        "used only by the original's legacy eval.py"),
    ('eval_config', 'ignore_groundtruth'): (
        "used only by the original's legacy eval.py; model_main always "
        'evaluates against the groundtruth'),
    ('eval_config', 'eval_instance_masks'): (
        "used only by the original's legacy eval.py; mask metrics follow "
        'metrics_set (coco_mask_metrics)'),
    # InputReader (train_input_reader and every eval_input_reader).
    ('input_reader', 'queue_capacity'): (
        "used only by the original's legacy queue-based readers; the input "
        'is a tf.data pipeline (see shuffle_buffer_size)'),
    ('input_reader', 'min_after_dequeue'): (
        "used only by the original's legacy queue-based readers; see "
        'shuffle_buffer_size'),
    ('input_reader', 'prefetch_size'): (
        'deprecated; set num_prefetch_batches instead'),
    ('input_reader', 'keypoint_type_weight'): (
        'read only by keypoint heads (CenterNet), which this version does '
        'not build'),
}

# Command -> NO_EFFECT_FIELDS keys it honours (see od_estimator.legacy).
HONOURED_BY_COMMAND = {
    'legacy_train': frozenset([
        ('train_config', 'sync_replicas'),
        ('train_config', 'replicas_to_aggregate')]),
    'legacy_eval': frozenset([
        ('eval_config', name) for name in (
            'num_examples', 'max_evals', 'eval_interval_secs',
            'visualization_export_dir', 'export_path', 'ignore_groundtruth')]),
}

# Below this decay a batch norm's moving averages follow training closely
# enough for a short from-scratch run to evaluate sensibly.
_SLOW_DECAY = 0.999

# Batch-norm decay of an SSD backbone's own arg_scope, used when
# override_base_feature_extractor_hyperparams is false. Types not listed
# either use a faster decay (ResNet 0.997, MobileDet and MnasFPN 0.99) or
# always take conv_hyperparams (Inception, the Keras-named MobileNet v2).
_BACKBONE_BATCH_NORM_DECAY = {
    extractor_type: 0.9997 for extractor_type in (
        'ssd_mobilenet_v1', 'ssd_mobilenet_v1_fpn', 'ssd_mobilenet_v1_ppn',
        'embedded_ssd_mobilenet_v1', 'ssd_mobilenet_v2',
        'ssd_mobilenet_v2_fpn', 'ssd_mobilenet_v3_large',
        'ssd_mobilenet_v3_small', 'ssd_mobilenet_edgetpu')
}


def _input_readers(configs):
  """[(field path, InputReader)] of the train and eval inputs."""
  readers = []
  if configs.get('train_input_config') is not None:
    readers.append(('train_input_reader', configs['train_input_config']))
  for index, reader in enumerate(configs.get('eval_input_configs') or ()):
    readers.append(('eval_input_reader[%d]' % index, reader))
  return readers


def _is_set(message, field):
  descriptor = message.DESCRIPTOR.fields_by_name[field]
  if descriptor.label == descriptor.LABEL_REPEATED:
    return len(getattr(message, field)) > 0
  return message.HasField(field)


def _honoured_by(key):
  """'; `python -m od_estimator.legacy.X` honours it' when one does."""
  for command, keys in sorted(HONOURED_BY_COMMAND.items()):
    if key in keys:
      return '; `python -m od_estimator.%s` honours it' % (
          command.replace('_', '.'))
  return ''


def no_effect_notes(configs, command=None):
  """One note per set field of NO_EFFECT_FIELDS, naming it and why.

  Args:
    configs: the configs dict of config_util (train_config, eval_config,
      train_input_config, eval_input_configs).
    command: a HONOURED_BY_COMMAND key: the fields it honours get no note.

  Returns:
    A list of note strings, in NO_EFFECT_FIELDS order.
  """
  notes = []
  honoured = HONOURED_BY_COMMAND.get(command, ())
  for (section, field), reason in NO_EFFECT_FIELDS.items():
    if (section, field) in honoured:
      continue
    if section == 'input_reader':
      messages = _input_readers(configs)
    elif configs.get(section) is not None:
      messages = [(section, configs[section])]
    else:
      messages = []
    for path, message in messages:
      if _is_set(message, field):
        notes.append('%s.%s has no effect: %s%s.' % (
            path, field, reason, _honoured_by((section, field))))
  return notes


def _slow_batch_norms(ssd_config):
  """[(where, decay)] of the SSD model's batch norms with a slow decay."""
  slow = []
  extractor = ssd_config.feature_extractor
  backbone_decay = _BACKBONE_BATCH_NORM_DECAY.get(extractor.type)
  if (backbone_decay is not None and
      not extractor.override_base_feature_extractor_hyperparams):
    slow.append(('the %s backbone\'s own batch norm (used while '
                 'model.ssd.feature_extractor.'
                 'override_base_feature_extractor_hyperparams is false)' %
                 extractor.type, backbone_decay))
  hyperparams = [('model.ssd.feature_extractor.conv_hyperparams',
                  extractor.conv_hyperparams)]
  predictor = ssd_config.box_predictor
  kind = predictor.WhichOneof('box_predictor_oneof')
  if kind and hasattr(getattr(predictor, kind), 'conv_hyperparams'):
    hyperparams.append(('model.ssd.box_predictor.%s.conv_hyperparams' % kind,
                        getattr(predictor, kind).conv_hyperparams))
  for where, config in hyperparams:
    if config.HasField('batch_norm') and config.batch_norm.decay >= _SLOW_DECAY:
      slow.append((where + '.batch_norm.decay', config.batch_norm.decay))
  return slow


def _ssd_from_scratch_note(ssd_config):
  """The SSD half of from_scratch_batch_norm_note: slow decays."""
  slow = _slow_batch_norms(ssd_config)
  if not slow:
    return None
  return (
      'with a slow batch-norm decay: %s. The moving averages that evaluation '
      'and export use need thousands of steps to settle, so a short run '
      'evaluates near zero (mAP ~0.001) even while its loss falls. Set '
      'model.ssd.feature_extractor.override_base_feature_extractor_'
      'hyperparams: true and conv_hyperparams { batch_norm { decay: 0.97 } } '
      '(in the feature extractor and the box predictor)' % '; '.join(
          '%s %g' % (where, decay) for where, decay in slow))


def _faster_rcnn_from_scratch_note(faster_rcnn_config):
  """The two-stage half of from_scratch_batch_norm_note: frozen batch norm.

  Without batch_norm_trainable the extractor's batch norms run in inference
  mode (as in the original): from scratch their statistics stay at their
  initial values (mean 0, variance 1), so the backbone learns without
  normalization.
  """
  extractor = faster_rcnn_config.feature_extractor
  if extractor.batch_norm_trainable:
    return None
  return (
      'with frozen batch norm: model.faster_rcnn.feature_extractor.'
      'batch_norm_trainable is false, so the %s backbone\'s batch norms keep '
      'their initial statistics (mean 0, variance 1) and it trains without '
      'normalization: slowly, and often to a model that detects nothing. Set '
      'model.faster_rcnn.feature_extractor.batch_norm_trainable: true' %
      extractor.type)


# Meta-architecture -> fn(its config) -> the middle of the note, or None.
_FROM_SCRATCH_NOTES = {
    'ssd': _ssd_from_scratch_note,
    'faster_rcnn': _faster_rcnn_from_scratch_note,
}


def from_scratch_batch_norm_note(configs):
  """A note when training from scratch with ill-suited batch norms.

  An SSD batch norm with a decay of 0.999 or more needs thousands of steps
  for its moving mean and variance to forget their initial values (0 and
  1); they are what evaluation and export use, so a short run without a
  fine_tune_checkpoint evaluates near zero however well it trains. A
  Faster R-CNN / Mask R-CNN extractor without batch_norm_trainable never
  updates them at all.

  Args:
    configs: the configs dict of config_util.

  Returns:
    The note string, or None.
  """
  model = configs.get('model')
  train_config = configs.get('train_config')
  if model is None or train_config is None or (
      train_config.fine_tune_checkpoint):
    return None
  meta_architecture = model.WhichOneof('model')
  note = _FROM_SCRATCH_NOTES.get(meta_architecture, lambda _: None)(
      getattr(model, meta_architecture) if meta_architecture else None)
  if note is None:
    return None
  return ('training from scratch (no train_config.fine_tune_checkpoint) %s, '
          'or start from a fine_tune_checkpoint.' % note)


def notes(configs, command=None):
  """Every note on `configs`: fields without effect, then advice.

  `command` names the command the configs run with (HONOURED_BY_COMMAND).
  """
  found = no_effect_notes(configs, command)
  batch_norm = from_scratch_batch_norm_note(configs)
  if batch_norm:
    found.append(batch_norm)
  return found
