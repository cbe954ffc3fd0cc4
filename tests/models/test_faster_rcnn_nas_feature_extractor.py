"""Faster R-CNN NASNet feature extractor.

Built with a reduced NASNet (6 cells of 8 filters: reductions before cells
2 and 4, so the split is at Cell_3 as NASNet-A large's is at Cell_11); the
full-size graph is built by tests/test_upstream_faster_rcnn_configs.py
from the original's faster_rcnn_nas_coco.config, which checks its cells'
names and shapes against the original's (tests/nasnet_large.py);
tests/nets/test_nasnet.py builds the classification heads on a tiny NASNet.
"""
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import faster_rcnn_nas_feature_extractor as nas
from od_estimator.nets import nasnet
from tests import fast_graphs
from tests import faster_rcnn_backbones as backbones

SMALL = dataclasses.replace(nasnet.LARGE, num_cells=6, num_conv_filters=8)


def _extractor(is_training=True, **kwargs):
  return nas.FasterRCNNNASFeatureExtractor(
      is_training=is_training, first_stage_features_stride=16,
      config=SMALL, **kwargs)


@pytest.fixture(scope='module')
def small():
  return backbones.build(_extractor(), train_steps=3)


def test_registry_type():
  assert (faster_rcnn_feature_extractor_registry
          .FASTER_RCNN_FEATURE_EXTRACTORS['faster_rcnn_nas']
          is nas.FasterRCNNNASFeatureExtractor)


def test_only_stride_16_is_built():
  with pytest.raises(errors.UserInputError, match='first_stage_features_st'):
    nas.FasterRCNNNASFeatureExtractor(
        is_training=True, first_stage_features_stride=8)


def test_images_of_unknown_size_are_refused_naming_the_resizer():
  with fast_graphs.new_graph():
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    with pytest.raises(errors.UserInputError, match='fixed_shape_resizer'):
      _extractor().extract_proposal_features(images, scope=backbones.FIRST)


def test_shapes(small):
  # 64 -> 31 (conv0) -> 16 -> 8 (stem) -> 4 (reduction_cell_0): stride 16;
  # cells 2 and 3 have 6 states of 16 filters, concatenated.
  assert small.rpn_feature_map.shape.as_list() == [1, 4, 4, 192]
  assert small.activations['Cell_3'].shape.as_list() == [1, 4, 4, 96]
  assert 'Cell_4' not in small.activations
  # reduction_cell_1 halves the map (SAME; 17 x 17 crops:
  # test_inference_second_stage_...); 6 states of 32 filters.
  assert small.box_classifier_features.shape.as_list() == [1, 2, 2, 192]


def test_stages_hold_the_original_scopes(small):
  first = small.names(backbones.FIRST)
  second = small.names(backbones.SECOND)
  assert {name.split('/')[0] for name in first} == {
      'conv0', 'conv0_bn', 'cell_stem_0', 'cell_stem_1', 'cell_0', 'cell_1',
      'reduction_cell_0', 'cell_2', 'cell_3'}
  assert {name.split('/')[0] for name in second} == {
      'reduction_cell_1', 'cell_4', 'cell_5'}
  # The second stage's first cells read the two halves of the crops.
  assert second['reduction_cell_1/1x1/weights'] == [1, 1, 96, 32]
  assert second['reduction_cell_1/prev_1x1/weights'] == [1, 1, 96, 32]
  assert second['cell_4/path1_conv/weights'] == [1, 1, 96, 16]
  assert second['cell_5/prev_1x1/weights'] == [1, 1, 128, 32]
  assert 'global_step' in small.variables


def test_restore_map_reads_moving_averages(small):
  restore = backbones.restore_map(small)
  assert len(restore) == len(small.variables) - 1  # All but global_step.
  assert restore['cell_stem_0/1x1/weights/ExponentialMovingAverage'] == (
      backbones.FIRST + '/cell_stem_0/1x1/weights')
  assert restore[
      'cell_3/comb_iter_0/left/bn_sep_5x5_2/moving_mean/'
      'ExponentialMovingAverage'] == (
          backbones.FIRST + '/cell_3/comb_iter_0/left/bn_sep_5x5_2/'
          'moving_mean')
  assert restore['reduction_cell_1/prev_bn/beta/ExponentialMovingAverage'] == (
      backbones.SECOND + '/reduction_cell_1/prev_bn/beta')
  assert all(name.endswith('/ExponentialMovingAverage') for name in restore)


def test_batch_norm_trains_in_the_first_stage_only(small):
  # The original's classification network sets its batch norm mode from
  # is_training; the second stage follows batch_norm_trainable (false).
  updates = backbones.update_ops(small)
  assert updates
  assert all(op.name.startswith(backbones.FIRST + '/') for op in updates)


def test_training_steps_decrease_a_toy_loss(small):
  assert np.all(np.isfinite(small.losses))
  assert small.losses[-1] < small.losses[0]


def test_inference_second_stage_has_no_drop_path():
  # The second stage alone (cheap); the first stage's cells are the
  # classification network's, whose inference mode test_nasnet checks.
  with fast_graphs.new_graph() as graph:
    features = _extractor(is_training=False).extract_box_classifier_features(
        tf.zeros([2, 17, 17, 192]), scope=backbones.SECOND)
    # reduction_cell_1 halves the crops (SAME); 6 states of 32 filters.
    assert features.shape.as_list() == [2, 9, 9, 192]
    assert not graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    assert not [op for op in graph.get_operations()
                if op.type == 'RandomUniform']
    assert tf.compat.v1.train.get_global_step() is None
