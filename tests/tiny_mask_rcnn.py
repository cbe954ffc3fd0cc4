"""A tiny real Mask R-CNN pipeline config for tests.

tests/tiny_faster_rcnn.py's config (64x64, 8 proposals) with three stages,
a mask head of 2 layers predicting 8x8 masks, and input readers that load
the generated shapes' PNG masks.
"""
from tests import tiny_faster_rcnn

MASK_SIZE = 8
MASK_HEAD = """predict_instance_masks: true
        mask_height: %d
        mask_width: %d
        mask_prediction_conv_depth: 16
        mask_prediction_num_conv_layers: 2
        conv_hyperparams {
          op: CONV
          regularizer { l2_regularizer { weight: 0.0 } }
          initializer { truncated_normal_initializer { stddev: 0.01 } }
        }
        use_dropout: false""" % (MASK_SIZE, MASK_SIZE)
LOAD_MASKS = 'load_instance_masks: true mask_type: PNG_MASKS'


def mask_edits(metrics_sets=('coco_mask_metrics',)):
  """tiny_faster_rcnn.apply_edits' edits: the mask head, masks read, metrics.

  Args:
    metrics_sets: eval_config.metrics_set values, in order.
  """
  return (('use_dropout: false', MASK_HEAD),
          ('max_number_of_boxes: 8', 'max_number_of_boxes: 8 ' + LOAD_MASKS),
          ('num_readers: 1', 'num_readers: 1 ' + LOAD_MASKS),
          ('metrics_set: "coco_detection_metrics"',
           ' '.join('metrics_set: "%s"' % name for name in metrics_sets)))


def write_config(directory, data_dir, extractor='faster_rcnn_resnet50',
                 model_fields='', batch_size=1, train_fields='',
                 metrics_set='coco_mask_metrics'):
  """Writes the Mask R-CNN config on generated shapes data; returns its path.

  Args: as tiny_faster_rcnn.write_config, and eval_config.metrics_set.
  """
  path = tiny_faster_rcnn.write_config(
      directory, data_dir, extractor=extractor,
      model_fields='number_of_stages: 3 ' + model_fields,
      batch_size=batch_size, train_fields=train_fields)
  with open(path) as f:
    text = f.read()
  with open(path, 'w') as f:
    f.write(tiny_faster_rcnn.apply_edits(text, mask_edits((metrics_set,))))
  return path


def write_overfit_config(directory, data_dir, **kwargs):
  """tiny_faster_rcnn.write_overfit_config's set and recipe with masks.

  The mask head trains with the box heads; evaluation reports the box and
  the mask COCO metrics.

  Returns:
    The pipeline.config path.
  """
  return tiny_faster_rcnn.write_overfit_config(
      directory, data_dir, model_fields='number_of_stages: 3',
      edits=mask_edits(('coco_detection_metrics', 'coco_mask_metrics')),
      **kwargs)
