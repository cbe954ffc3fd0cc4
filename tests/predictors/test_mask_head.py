"""The Mask R-CNN mask head: the original's names, shapes and depth rule."""
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.predictors.heads import mask_head


def _conv_hyperparams():
  with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu) as scope:
    return scope


def _variables_and_output(features_shape, **kwargs):
  with tf.Graph().as_default():
    head = mask_head.MaskRCNNMaskHead(conv_hyperparams_fn=_conv_hyperparams,
                                      **kwargs)
    with tf.compat.v1.variable_scope('SecondStageBoxPredictor'):
      output = head.predict(tf.zeros(features_shape))
    return ({v.op.name: v.shape.as_list()
             for v in tf.compat.v1.global_variables()},
            output.shape.as_list())


@pytest.mark.parametrize('channels,num_classes,depth', [
    (2048, 90, 256),   # ResNet-101 / -50 on COCO
    (1536, 90, 256),   # Inception-ResNet v2 on COCO
    (1024, 90, 256),   # Inception v2 on COCO
    (1024, 37, 128),   # log2 mean 7.13
    (2048, 3, 32),     # log2 mean 5.35
])
def test_automatic_depth(channels, num_classes, depth):
  assert mask_head.mask_conv_depth(channels, num_classes) == depth


def test_resnet101_coco_names_and_shapes():
  """mask_rcnn_resnet101_atrous_coco: 33x33 masks, 4 layers, depth 0."""
  variables, output = _variables_and_output(
      [5, 7, 7, 2048], num_classes=90, mask_height=33, mask_width=33,
      mask_prediction_num_conv_layers=4, mask_prediction_conv_depth=0)
  prefix = 'SecondStageBoxPredictor/'
  assert variables == {
      prefix + 'Conv/weights': [3, 3, 2048, 256], prefix + 'Conv/biases': [256],
      prefix + 'Conv_1/weights': [3, 3, 256, 256],
      prefix + 'Conv_1/biases': [256],
      prefix + 'Conv_2/weights': [3, 3, 256, 256],
      prefix + 'Conv_2/biases': [256],
      prefix + 'Conv_3/weights': [3, 3, 256, 90],
      prefix + 'Conv_3/biases': [90]}
  assert output == [5, 1, 90, 33, 33]


def test_defaults_and_class_agnostic_masks():
  """The proto defaults (15x15, 2 layers, depth 256), one mask per ROI."""
  variables, output = _variables_and_output(
      [3, 7, 7, 64], num_classes=4, masks_are_class_agnostic=True)
  assert sorted(variables) == [
      'SecondStageBoxPredictor/Conv/biases',
      'SecondStageBoxPredictor/Conv/weights',
      'SecondStageBoxPredictor/Conv_1/biases',
      'SecondStageBoxPredictor/Conv_1/weights']
  assert variables['SecondStageBoxPredictor/Conv_1/weights'] == [3, 3, 256, 1]
  assert output == [3, 1, 1, 15, 15]


def test_convolve_then_upsample():
  variables, output = _variables_and_output(
      [2, 7, 7, 16], num_classes=3, mask_height=14, mask_width=14,
      mask_prediction_conv_depth=8, convolve_then_upsample=True)
  # One hidden convolution at 7x7, one after the 2x upsampling, the last.
  assert variables['SecondStageBoxPredictor/Conv/weights'] == [3, 3, 16, 8]
  assert variables['SecondStageBoxPredictor/Conv_1/weights'] == [3, 3, 8, 8]
  assert variables['SecondStageBoxPredictor/Conv_2/weights'] == [3, 3, 8, 3]
  assert output == [2, 1, 3, 14, 14]
  with pytest.raises(ValueError, match='multiple'):
    _variables_and_output([2, 7, 7, 16], num_classes=3, mask_height=15,
                          convolve_then_upsample=True)


def test_convolve_then_upsample_keeps_height_and_width_apart():
  """A mask taller than wide upsamples the ROI features by its own factor
  in each dimension (2 in height, 4 in width here)."""
  _, output = _variables_and_output(
      [2, 7, 7, 16], num_classes=3, mask_height=14, mask_width=28,
      mask_prediction_conv_depth=8, convolve_then_upsample=True)
  assert output == [2, 1, 3, 14, 28]


def test_last_layer_is_linear_and_resizes_first(execute):
  """One layer: the bilinear resize (align_corners) then a linear 3x3 conv
  of ones, so a constant map of c gives 9 * c * channels inside."""
  def graph_fn():
    def hyperparams():
      with slim.arg_scope(
          [slim.conv2d], activation_fn=tf.nn.relu,
          normalizer_fn=slim.batch_norm,
          weights_initializer=tf.compat.v1.ones_initializer()) as scope:
        return scope
    head = mask_head.MaskRCNNMaskHead(
        num_classes=1, conv_hyperparams_fn=hyperparams, mask_height=5,
        mask_width=5, mask_prediction_num_conv_layers=1)
    return head.predict(-tf.ones([1, 3, 3, 2]))

  output = execute(graph_fn)
  assert output.shape == (1, 1, 1, 5, 5)
  assert output[0, 0, 0, 2, 2] == pytest.approx(-18.0)


@pytest.mark.parametrize('normalizer,batch_norm_training,mixes', [
    (None, None, False),
    (slim.group_norm, None, False),
    (slim.batch_norm, False, False),   # moving statistics: per ROI
    (slim.batch_norm, True, True),     # batch statistics mix the ROIs
    (tf.identity, None, True),         # unknown: assumed to mix
])
def test_mixes_rois_only_with_batch_statistics(normalizer, batch_norm_training,
                                               mixes):
  def hyperparams():
    with slim.arg_scope([slim.batch_norm],
                        is_training=bool(batch_norm_training)):
      with slim.arg_scope([slim.conv2d], normalizer_fn=normalizer) as scope:
        return scope

  head = mask_head.MaskRCNNMaskHead(num_classes=3,
                                    conv_hyperparams_fn=hyperparams)
  assert head.mixes_rois() is mixes
