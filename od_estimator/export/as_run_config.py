"""Compares an export's config with the as-run config of its checkpoint.

model_main saves the config it trains with into model_dir as pipeline.config.
Exporting a checkpoint of that model_dir with another config (the original
file edited since, another model's sample) builds the model of the config
given, not the one trained: a checkpoint of other shapes fails to restore,
and one that restores gives other detections (another image size, proposal
count). One warning names the model fields that differ.
"""
import os

from absl import logging
from google.protobuf import text_format
import tensorflow as tf

from od_estimator import errors
from od_estimator.config import config_util


def _image_size(resizer):
  """A short text of an ImageResizer: 300x300, min 600 max 1024, ..."""
  kind = resizer.WhichOneof('image_resizer_oneof')
  if kind == 'fixed_shape_resizer':
    return '%dx%d' % (resizer.fixed_shape_resizer.height,
                      resizer.fixed_shape_resizer.width)
  if kind == 'keep_aspect_ratio_resizer':
    keep = resizer.keep_aspect_ratio_resizer
    return 'min %d max %d' % (keep.min_dimension, keep.max_dimension)
  return text_format.MessageToString(resizer, as_one_line=True) or 'none'


def _model_fields(model_config):
  """{name: value} of the model fields an export must share with training."""
  family = model_config.WhichOneof('model')
  fields = {'meta-architecture': family}
  meta = getattr(model_config, family) if family else None
  names = meta.DESCRIPTOR.fields_by_name if meta is not None else {}
  if 'num_classes' in names:
    fields['num_classes'] = meta.num_classes
  if 'image_resizer' in names:
    fields['image size'] = _image_size(meta.image_resizer)
  if 'feature_extractor' in names:
    fields['feature extractor type'] = meta.feature_extractor.type
  if 'first_stage_max_proposals' in names:
    fields['proposal count (first_stage_max_proposals)'] = (
        meta.first_stage_max_proposals)
  return fields


def differences(pipeline_config, as_run_config):
  """['name value (as run: value)'] of the model fields that differ."""
  given = _model_fields(pipeline_config.model)
  as_run = _model_fields(as_run_config.model)
  if given['meta-architecture'] != as_run['meta-architecture']:
    names = ['meta-architecture']
  else:
    names = [name for name in given if given[name] != as_run.get(name)]
  return ['%s %s (as run: %s)' % (name, given[name], as_run[name])
          for name in names]


def warn_if_different(pipeline_config, checkpoint):
  """Logs one warning when the config differs from the checkpoint's as-run one.

  Args:
    pipeline_config: the TrainEvalPipelineConfig being exported.
    checkpoint: the checkpoint prefix; its folder's pipeline.config, when
      there is one that parses, is the as-run config.

  Returns:
    The warning line, or None (equal fields, or no as-run config).
  """
  as_run_path = os.path.join(os.path.dirname(checkpoint), 'pipeline.config')
  if not tf.io.gfile.exists(as_run_path):
    return None
  try:
    as_run_config = config_util.read_pipeline_config(as_run_path)
  except errors.UserInputError:
    # Not a config model_main wrote: nothing to compare with.
    return None
  found = as_run_config.HasField('model') and differences(pipeline_config,
                                                          as_run_config)
  if not found:
    return None
  line = ('the config exported differs from %s, the config the checkpoint '
          'was trained with: %s. The export builds the model of the config '
          'given; to export the model as trained, pass '
          '--pipeline_config_path=%s.' % (as_run_path, ', '.join(found),
                                          as_run_path))
  logging.warning(line)
  return line
