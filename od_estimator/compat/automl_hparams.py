"""Google automl EfficientDet hparams, and the pipeline.config they make.

automl configures a model by name (`efficientdet-d0` ...) plus `--hparams`
overrides: comma-separated `key=value` pairs (dotted keys for nested dicts,
values as Python literals) or a YAML file. `parse` gives the overrides as a
dict; `resolve` merges them on the named model's defaults (the values of
automl's hparams_config.py, recorded below as facts); `pipeline_text`
writes our pipeline.config for the result.

Every key has a place: a config field (`_MAPPED`), run-time or logging
settings that change no result (`_RUN_TIME`), or an automl feature we lack,
refused when set to anything but its default (`_DEFAULT_ONLY`). An unknown
key is refused, as automl's own override refuses it.
"""
import ast
import math
import re

import yaml

from od_estimator import errors
from od_estimator.compat import automl_label_maps

# automl's default_detection_configs() and efficientdet-d0's overrides (keys
# of its TF1 and TF2 generations alike).
# (efficientdet-d1 ... d7x tap other backbone blocks than the TF2 lineage:
# see automl_checkpoint.)
DEFAULTS = {
    'name': 'efficientdet-d0', 'act_type': 'swish', 'image_size': 512,
    'target_size': None, 'input_rand_hflip': True, 'jitter_min': 0.1,
    'jitter_max': 2.0, 'autoaugment_policy': None, 'use_augmix': False,
    'augmix_params': [3, -1, 1], 'grid_mask': False,
    'sample_image': None, 'map_freq': 5, 'num_classes': 90,
    'seg_num_classes': 3, 'heads': ['object_detection'],
    'skip_crowd_during_training': True, 'label_map': None,
    'max_instances_per_image': 100, 'regenerate_source_id': False,
    'min_level': 3, 'max_level': 7, 'num_scales': 3,
    'aspect_ratios': [1.0, 2.0, 0.5], 'anchor_scale': 4.0,
    'is_training_bn': True, 'momentum': 0.9, 'optimizer': 'sgd',
    'learning_rate': 0.08, 'lr_warmup_init': 0.008, 'lr_warmup_epoch': 1.0,
    'first_lr_drop_epoch': 200.0, 'second_lr_drop_epoch': 250.0,
    'poly_lr_power': 0.9, 'clip_gradients_norm': 10.0, 'num_epochs': 300,
    'data_format': 'channels_last', 'mean_rgb': [0.485 * 255, 0.456 * 255,
                                                 0.406 * 255],
    'stddev_rgb': [0.229 * 255, 0.224 * 255, 0.225 * 255],
    'scale_range': False, 'label_smoothing': 0.0, 'alpha': 0.25,
    'gamma': 1.5, 'delta': 0.1, 'box_loss_weight': 50.0,
    'iou_loss_type': None, 'iou_loss_weight': 1.0, 'weight_decay': 4e-5,
    'strategy': None, 'mixed_precision': False, 'loss_scale': None,
    'model_optimizations': {}, 'box_class_repeats': 3,
    'fpn_cell_repeats': 3, 'fpn_num_filters': 64, 'separable_conv': True,
    'apply_bn_for_resampling': True, 'conv_after_downsample': False,
    'conv_bn_act_pattern': False, 'drop_remainder': True,
    'nms_configs': {'method': 'gaussian', 'iou_thresh': None,
                    'score_thresh': None, 'sigma': None, 'pyfunc': False,
                    'max_nms_inputs': 0, 'max_output_size': 100},
    'tflite_max_detections': 100, 'fpn_name': None,
    'fpn_weight_method': None, 'fpn_config': None, 'survival_prob': None,
    'img_summary_steps': None, 'lr_decay_method': 'cosine',
    'moving_average_decay': 0.9998, 'ckpt_var_scope': None,
    'skip_mismatch': True, 'backbone_name': 'efficientnet-b0',
    'backbone_config': None, 'var_freeze_expr': None,
    'use_keras_model': True, 'dataset_type': None, 'positives_momentum': None,
    'grad_checkpoint': False, 'verbose': 1, 'save_freq': 'epoch',
    'each_epoch_in_separate_process': False, 'resnet_depth': 50,
    'device': {'grad_ckpting': False, 'grad_ckpting_list': ['Add_', 'AddN'],
               'nvgpu_logging': False},
}
MODEL_NAMES = ('efficientdet-d0',)

# Keys with a counterpart in our config (see pipeline_text).
_MAPPED = (
    'num_classes', 'image_size', 'label_map', 'input_rand_hflip',
    'jitter_min', 'jitter_max', 'max_instances_per_image', 'min_level',
    'max_level', 'num_scales', 'aspect_ratios', 'anchor_scale', 'momentum',
    'optimizer', 'learning_rate', 'lr_warmup_init', 'lr_warmup_epoch',
    'num_epochs', 'clip_gradients_norm', 'alpha', 'gamma', 'delta',
    'box_loss_weight', 'weight_decay', 'box_class_repeats',
    'fpn_cell_repeats', 'fpn_num_filters', 'fpn_weight_method',
    'nms_configs', 'moving_average_decay', 'var_freeze_expr',
    'lr_decay_method',
    # Read by automl's stepwise and polynomial schedules only, which are
    # refused; its cosine schedule, as ours, has no use for them.
    'first_lr_drop_epoch', 'second_lr_drop_epoch', 'poly_lr_power')
# Keys that change no computation of ours (devices, logging, file layout,
# automl's own loops) or whose value is the network we build anyway.
_RUN_TIME = (
    'name', 'is_training_bn', 'data_format', 'strategy', 'mixed_precision',
    'loss_scale', 'img_summary_steps', 'ckpt_var_scope', 'skip_mismatch',
    'use_keras_model', 'drop_remainder', 'verbose', 'save_freq',
    'each_epoch_in_separate_process', 'resnet_depth', 'map_freq',
    'sample_image', 'regenerate_source_id', 'skip_crowd_during_training',
    'tflite_max_detections', 'grad_checkpoint', 'dataset_type',
    'seg_num_classes', 'backbone_name', 'target_size', 'device')
# Everything else: only automl's default value has a counterpart.
_DEFAULT_ONLY = tuple(sorted(set(DEFAULTS) - set(_MAPPED) - set(_RUN_TIME)))
# Values the converted network depends on that our EfficientDet-D0 fixes.
_FIXED = {'backbone_name': 'efficientnet-b0', 'act_type': 'swish',
          'target_size': None}
WEIGHT_METHODS = {None: 'fast_attention', 'fastattn': 'fast_attention',
                   'attn': 'attention', 'sum': 'sum'}
_LR_METHODS = ('cosine', 'stepwise', 'polynomial', 'constant')
# automl's main.py defaults, which turn epochs into steps.
TRAIN_BATCH_SIZE = 64
NUM_EXAMPLES_PER_EPOCH = 120000


def _literal(text):
  """A value as automl reads it: true/false, a Python literal, or text."""
  if text in ('true', 'false'):
    return text == 'true'
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def _nest(key, value):
  head, _, rest = key.partition('.')
  return {head: _nest(rest, value) if rest else value}


def _merge(target, source):
  for key, value in source.items():
    if isinstance(value, dict) and isinstance(target.get(key), dict):
      _merge(target[key], value)
    else:
      target[key] = value
  return target


def parse(hparams):
  """--hparams text -> dict of overrides.

  Args:
    hparams: '' , 'key=value,key.sub=value' pairs, or a .yaml file path.

  Raises:
    errors.UserInputError: a pair without '=' or an unreadable YAML file.
  """
  if not hparams:
    return {}
  if hparams.endswith(('.yaml', '.yml')) and '=' not in hparams:
    try:
      with open(hparams) as stream:
        loaded = yaml.safe_load(stream)
    except (OSError, yaml.YAMLError) as error:
      raise errors.UserInputError('--hparams %s: cannot read this YAML '
                                  'file: %s' % (hparams, error)) from None
    if not isinstance(loaded, dict):
      raise errors.UserInputError('--hparams %s: expected a mapping of '
                                  'hparams, got %r.' % (hparams, loaded))
    return loaded
  overrides = {}
  for pair in hparams.split(','):
    if not pair:
      continue
    key, equals, value = pair.partition('=')
    if not equals or not key.strip():
      raise errors.UserInputError(
          '--hparams: %r is not key=value (give comma-separated key=value '
          'pairs or a .yaml file).' % pair)
    _merge(overrides, _nest(key.strip(), _literal(value.strip())))
  return overrides


def resolve(model_name, overrides):
  """The model's hparams: automl's defaults with `overrides` merged.

  Raises:
    errors.UserInputError: an unknown model or key, or a value we cannot
      honour (naming the hparam and why).
  """
  if model_name not in MODEL_NAMES:
    raise errors.UserInputError(
        '--model_name %r is not supported; expected one of %s (automl\'s '
        'efficientdet-d1 ... d7x tap EfficientNet blocks other than the TF2 '
        'lineage\'s extractors, which we build).' % (
            model_name, ', '.join(MODEL_NAMES)))
  unknown = sorted(set(overrides) - set(DEFAULTS))
  if unknown:
    raise errors.UserInputError(
        '--hparams: unknown key(s) %s (automl refuses them too).' %
        ', '.join(unknown))
  hparams = _merge(yaml.safe_load(yaml.safe_dump(DEFAULTS)), overrides)
  size = hparams['image_size']
  if isinstance(size, str) and re.fullmatch(r'(\d+)x\1', size):
    # automl's 'WxH' form; a square one is the same as one integer.
    hparams['image_size'] = int(size.partition('x')[0])
  _check(hparams)
  return hparams


def _refuse(key, value, why):
  raise errors.UserInputError('--hparams %s=%r is not supported: %s' % (
      key, value, why))


def _check(hparams):
  """Refuses values without a counterpart, naming the hparam."""
  for key in _DEFAULT_ONLY:
    if hparams[key] != DEFAULTS[key]:
      _refuse(key, hparams[key], 'only automl\'s default %r has a '
              'counterpart here (see the README, EfficientDet, automl '
              'lineage)' % (DEFAULTS[key],))
  for key, value in _FIXED.items():
    if hparams[key] != value:
      _refuse(key, hparams[key], 'the converted EfficientDet-D0 has %r' %
              (value,))
  size = hparams['image_size']
  stride = 2 ** hparams['max_level']
  if not isinstance(size, int) or size % stride:
    _refuse('image_size', size, 'it must be one integer (square images), a '
            'multiple of 2**max_level = %d, for automl\'s feature maps and '
            'anchors to be ours' % stride)
  if not 3 <= hparams['min_level'] < hparams['max_level']:
    _refuse('min_level', hparams['min_level'], 'levels 3 <= min_level < '
            'max_level are built')
  if hparams['fpn_weight_method'] not in WEIGHT_METHODS:
    _refuse('fpn_weight_method', hparams['fpn_weight_method'],
            'expected one of fastattn, attn, sum')
  if hparams['lr_decay_method'] != 'cosine':
    _refuse('lr_decay_method', hparams['lr_decay_method'],
            'only cosine has a counterpart (cosine_decay_learning_rate)')
  if hparams['optimizer'] not in ('sgd', 'adam'):
    _refuse('optimizer', hparams['optimizer'], 'expected sgd or adam')
  nms = hparams['nms_configs']
  if nms.get('method') not in ('gaussian', 'hard', None, ''):
    _refuse('nms_configs.method', nms.get('method'),
            'expected gaussian or hard')
  for key in ('max_nms_inputs', 'pyfunc'):
    if nms.get(key):
      _refuse('nms_configs.' + key, nms[key], 'only automl\'s default '
              '(0, false) has a counterpart here')
  unknown = sorted(set(nms) - set(DEFAULTS['nms_configs']))
  if unknown:
    _refuse('nms_configs', nms, 'unknown key(s) %s' % ', '.join(unknown))
  aspect_ratios(hparams)


def aspect_ratios(hparams):
  """Our aspect ratios (width / height) of automl's.

  automl gives a float r (width sqrt(r), height 1 / sqrt(r) of the base
  size) or a (w, h) pair; a pair is ours only when w * h = 1.
  """
  ratios = []
  for ratio in hparams['aspect_ratios']:
    if isinstance(ratio, (list, tuple)):
      width, height = ratio
      if not math.isclose(width * height, 1.0, rel_tol=1e-6):
        _refuse('aspect_ratios', hparams['aspect_ratios'],
                'the pair %r has width * height != 1, an anchor area our '
                'multiscale anchors cannot give; give ratios as floats '
                '(2.0 for (1.4142, 0.7071))' % (ratio,))
      ratio = width / height
    ratios.append(float(ratio))
  return ratios


def label_map_items(label_map):
  """[(id, name)] of automl's label_map: 'coco', 'voc', a dict, or None."""
  if label_map is None or label_map == 'coco':
    return sorted(automl_label_maps.COCO.items())
  if label_map == 'voc':
    return sorted(automl_label_maps.VOC.items())
  if isinstance(label_map, str) and label_map.endswith(('.yaml', '.yml')):
    return label_map_items(parse(label_map))
  if isinstance(label_map, dict):
    try:
      return sorted((int(key), str(name)) for key, name in label_map.items())
    except ValueError:
      pass
  _refuse('label_map', label_map, "expected 'coco', 'voc', a {id: name} "
          'dict or a .yaml file of one')
