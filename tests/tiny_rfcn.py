"""A tiny real R-FCN pipeline config for tests.

tests/tiny_faster_rcnn.py's config (64x64, 8 proposals) whose second stage
is R-FCN's: no ROI crop, and a position-sensitive predictor of 2 x 2 bins
over a 4 x 4 crop on a 16-channel reduce_depth.
"""
from tests import tiny_faster_rcnn

# The RPN's conv hyperparams, as in the original's R-FCN configs.
_RPN_HYPERPARAMS = tiny_faster_rcnn.CONFIG[
    tiny_faster_rcnn.CONFIG.index('first_stage_box_predictor_conv_hyperparams')
    + len('first_stage_box_predictor_conv_hyperparams'):
    tiny_faster_rcnn.CONFIG.index('first_stage_box_predictor_depth')]
RFCN_PREDICTOR = """rfcn_box_predictor {
        conv_hyperparams %s
        depth: 16
        crop_height: 4
        crop_width: 4
        num_spatial_bins_height: 2
        num_spatial_bins_width: 2
      }""" % _RPN_HYPERPARAMS.strip()
_MASK_RCNN_PREDICTOR = tiny_faster_rcnn.CONFIG[
    tiny_faster_rcnn.CONFIG.index('mask_rcnn_box_predictor {'):
    tiny_faster_rcnn.CONFIG.index('\n    }\n    second_stage_post_processing')]


def rfcn_edits(initial_crop_size=14):
  """tiny_faster_rcnn.apply_edits' edits: the ROI crop fields, which R-FCN
  refuses, out (initial_crop_size: the config's), R-FCN's predictor in."""
  return (('initial_crop_size: %d\n    maxpool_kernel_size: 2\n'
           '    maxpool_stride: 2\n' % initial_crop_size, ''),
          (_MASK_RCNN_PREDICTOR, RFCN_PREDICTOR))


def write_config(directory, data_dir, extractor='faster_rcnn_resnet50',
                 model_fields='', batch_size=1, train_fields=''):
  """Writes the R-FCN config on generated shapes data; returns its path.

  Args: as tiny_faster_rcnn.write_config.
  """
  path = tiny_faster_rcnn.write_config(
      directory, data_dir, extractor=extractor, model_fields=model_fields,
      batch_size=batch_size, train_fields=train_fields)
  with open(path) as f:
    text = f.read()
  with open(path, 'w') as f:
    f.write(tiny_faster_rcnn.apply_edits(text, rfcn_edits()))
  return path


def write_overfit_config(directory, data_dir, **kwargs):
  """tiny_faster_rcnn.write_overfit_config's set and recipe with R-FCN."""
  return tiny_faster_rcnn.write_overfit_config(
      directory, data_dir, edits=rfcn_edits(initial_crop_size=6), **kwargs)

