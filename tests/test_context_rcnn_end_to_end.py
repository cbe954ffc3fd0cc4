"""A tiny real Context R-CNN end to end: model_main trains it from generated
tf.SequenceExamples with context features until it overfits them, and
evaluates it with COCO metrics; the attention into the context trains.

tests/tiny_context_rcnn.py's model (64x64, 8 proposals, 8 context rows of 7
values, bottleneck 8; the tiny ResNet of tests/tiny_resnet.py) on the Faster
R-CNN end to end's images and recipe (tests/test_faster_rcnn_end_to_end.py),
each image a one-frame sequence of one camera whose context rows are the
camera's two shapes (class one-hot and box, as
create_synthetic_sequence_tf_record writes them); the attention block trains
with the heads. The run is tests/trained_models.py's overfit_context_rcnn
(CONTEXT_RCNN_STEPS steps, seed trained_models.SEED). Measured mAP@.5 with
seeds 1, 2, 3, 4: 1.0 for each at 60 steps; 1.0, 1.0, 0.0, 1.0 at 40; 0.5,
0.5 (seeds 1, 2) at 25, on an Intel CPU. On an AMD EPYC (other oneDNN
kernels, other rounding) seed 1 stayed at 0.5 at 60 and 80 steps (one shape
never found) and reached 1.0 at 120, where seeds 2, 3 and 4 pass too, and
seed 1 with oneDNN off: 120 it is. (These on ResNet-50; on the tiny ResNet,
AMD EPYC, seeds 1 and 2 at 120: 1.0 and 0.75.)
(With both images one two-frame sequence, of which training takes a random
frame per example: 0.5 and 0.5 at 60 steps.)
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.meta_architectures import context_rcnn_lib
from tests import event_tags
from tests import trained_models


@pytest.fixture(scope='module')
def trained(overfit_context_rcnn):
  """model_main's run of CONTEXT_RCNN_STEPS steps and evaluation."""
  return overfit_context_rcnn


def test_model_main_trains_and_evaluates_from_sequence_examples(trained):
  assert trained['checkpoint'].endswith(
      '-%d' % trained_models.CONTEXT_RCNN_STEPS)
  with open(trained['config']) as f:
    text = f.read()
  assert 'context_config' in text
  assert text.count('input_type: TF_SEQUENCE_EXAMPLE') == 2
  train_tags = event_tags.scalar_tags(trained['model_dir'])
  for tag in ('Loss/BoxClassifierLoss/classification_loss',
              'Loss/RPNLoss/objectness_loss', 'Loss/total_loss'):
    assert tag in train_tags, (tag, sorted(train_tags))
  metrics = event_tags.last_scalars(
      os.path.join(trained['model_dir'], 'eval_0'))
  for tag in ('DetectionBoxes_Precision/mAP', 'DetectionBoxes_Recall/AR@100',
              'Loss/BoxClassifierLoss/localization_loss'):
    assert tag in metrics, (tag, sorted(metrics))
  # Chance is near 0: two shapes, three classes, ~100 anchors.
  assert metrics['DetectionBoxes_Precision/mAP@.50IOU'] > 0.5, metrics


def test_the_attention_into_the_context_trains(trained):
  initial = tf.train.load_checkpoint(
      os.path.join(trained['model_dir'], 'model.ckpt-0'))
  final = tf.train.load_checkpoint(trained['checkpoint'])
  block = context_rcnn_lib.ATTENTION_BLOCK_SCOPE
  for scope in (block + '/' + context_rcnn_lib.QUERY_SCOPE,
                block + '/' + context_rcnn_lib.KEY_SCOPE,
                block + '/' + context_rcnn_lib.VALUE_SCOPE,
                context_rcnn_lib.OUTPUT_SCOPE):
    name = scope + '/weights'
    assert not np.allclose(initial.get_tensor(name), final.get_tensor(name),
                           atol=1e-4), name
