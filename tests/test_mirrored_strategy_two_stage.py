"""MirroredStrategy training of Faster R-CNN matches one device.

As tests/mirrored_training.py compares them: one step of tiny_faster_rcnn's
model through the Estimator, with 2 CPU replicas against one device, on
batches [a, b, a, b]. The fake extractor of tests/fakes.py (1x1 convs, no
batch norm) keeps the step fast and leaves no batch statistics to differ.

Faster R-CNN samples at random: anchors for the RPN loss and proposals for
the box classifier. Seeds cannot make them agree (the replicas draw other
numbers than the single device), so every candidate is taken instead: the
RPN minibatch is twice the anchors, so even its positive half holds them
all; the first stage keeps up to one proposal per anchor (8 random ones
held no positive, leaving the box classifier's localization loss at 0) and
the second stage's batch is as large, with a balance fraction of 1, so it
takes every positive proposal and fills up with every negative one.
Without augmentation or dropout nothing random is left, and the losses,
normalized per image and averaged over the batch, are the same for a 2-
as for a 4-image batch. Sampling at random instead (an RPN minibatch of
16, 8 proposals at the default fraction 0.25) makes the updates differ by
up to 10 times the tolerance.
"""
import pytest

from od_estimator.config import config_util
from od_estimator.models import faster_rcnn_feature_extractor_registry
from tests import fakes
from tests import mirrored_training
from tests import tiny_faster_rcnn

BATCH_SIZE = 4

# 4x4 positions of the stride-16 map of 64x64 images, 9 anchors each.
ANCHORS = 4 * 4 * 9

LOSSES = ('Loss/total_loss', 'Loss/RPNLoss/localization_loss',
          'Loss/RPNLoss/objectness_loss',
          'Loss/BoxClassifierLoss/localization_loss',
          'Loss/BoxClassifierLoss/classification_loss')

# The longest sum behind any gradient or loss of this model: the batch
# times the 64x64 positions of the fake extractor's first 1x1 conv.
SUMMED_TERMS = BATCH_SIZE * 64 * 64


def _every_candidate_config(root):
  """tiny_faster_rcnn's config sampling every anchor and proposal."""
  path = tiny_faster_rcnn.write_config(root, root / 'data', extractor='fake',
                                       batch_size=BATCH_SIZE)
  configs = config_util.get_configs_from_pipeline_file(path)
  faster_rcnn = configs['model'].faster_rcnn
  faster_rcnn.first_stage_minibatch_size = 2 * ANCHORS
  faster_rcnn.first_stage_max_proposals = ANCHORS
  faster_rcnn.second_stage_batch_size = ANCHORS
  faster_rcnn.second_stage_balance_fraction = 1.0
  mirrored_training.use_repeated_pair(
      configs, str(root / 'data' / 'shapes_train.record-*'), root)
  config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), str(root))
  return path


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """Trains one step on one device, then from there with 2 replicas."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
        'fake', fakes.FakeFasterRCNNFeatureExtractor)
    return mirrored_training.train_single_then_mirrored(
        tmp_path_factory, _every_candidate_config)


def test_one_step_losses_match_single_device(trained):
  single_dir, mirrored_dir = trained
  mirrored_training.assert_losses_match(
      mirrored_training.first_losses(single_dir, LOSSES),
      mirrored_training.first_losses(mirrored_dir, LOSSES), SUMMED_TERMS)


def test_one_step_updates_match_single_device(trained):
  mirrored_training.assert_updates_match(
      *mirrored_training.trained_variables(*trained), SUMMED_TERMS)
