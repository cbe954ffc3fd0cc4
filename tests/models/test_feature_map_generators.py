"""Feature map generators: names (checkpoint compatibility), shapes, values.

Layer/variable names were checked against the TF1 Object Detection API's own
generators on the same layouts; a model-zoo checkpoint restores only if these
match exactly.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from od_estimator.models import feature_map_generators as fmg


def _variable_shapes():
  return {v.op.name: v.shape.as_list()
          for v in tf.compat.v1.global_variables()}


def _identity_kernel(shape, dtype=tf.float32, partition_info=None):
  """Conv kernel whose output equals its input (center tap = identity)."""
  del partition_info
  height, width, in_depth, out_depth = shape
  kernel = np.zeros(shape, np.float32)
  kernel[height // 2, width // 2] = np.eye(in_depth, out_depth)
  return tf.constant(kernel, dtype)


def _linear_scope(weights_initializer):
  """arg_scope making every conv linear with the given weights, zero bias."""
  return slim.arg_scope(
      [slim.conv2d, slim.separable_conv2d], activation_fn=None,
      normalizer_fn=None, weights_initializer=weights_initializer,
      biases_initializer=tf.compat.v1.zeros_initializer())


class TestHelpers:

  def test_get_depth_fn(self):
    depth_fn = fmg.get_depth_fn(depth_multiplier=0.25, min_depth=16)
    assert depth_fn(512) == 128  # 512 * 0.25
    assert depth_fn(100) == 25  # int(25.0)
    assert depth_fn(40) == 16  # int(10.0) raised to min_depth
    assert fmg.get_depth_fn(1.0, 8)(3) == 8

  def test_fixed_padding(self, execute):
    image = np.ones([1, 2, 2, 1], np.float32)
    # kernel 3: total 2 -> 1 before, 1 after.
    out = execute(lambda x: fmg.fixed_padding(x, 3), [image])
    expected = np.zeros([1, 4, 4, 1], np.float32)
    expected[0, 1:3, 1:3, 0] = 1
    np.testing.assert_array_equal(out, expected)
    # kernel 4: total 3 -> 1 before, 2 after.
    assert execute(lambda x: fmg.fixed_padding(x, 4), [image]).shape == (
        1, 5, 5, 1)
    # kernel 3, rate 2: effective kernel 5 -> 2 before, 2 after.
    out = execute(lambda x: fmg.fixed_padding(x, 3, rate=2), [image])
    assert out.shape == (1, 6, 6, 1)
    assert out[0, 2:4, 2:4, 0].sum() == 4 and out.sum() == 4

  @pytest.mark.parametrize('dynamic', [False, True])
  def test_nearest_neighbor_upsampling(self, execute, dynamic):
    image = np.arange(12, dtype=np.float32).reshape([1, 2, 3, 2])
    out = execute(lambda x: fmg.nearest_neighbor_upsampling(x, scale=2),
                  [image], dynamic=dynamic)
    expected = image.repeat(2, axis=1).repeat(2, axis=2)
    np.testing.assert_array_equal(out, expected)
    # e.g. pixel (0, 1) = [2, 3] fills output rows 0-1, cols 2-3.
    np.testing.assert_array_equal(out[0, 1, 3], [2, 3])

  @pytest.mark.parametrize('dynamic', [False, True])
  def test_pad_to_multiple(self, execute, dynamic):
    image = np.arange(15, dtype=np.float32).reshape([1, 3, 5, 1]) + 1
    out = execute(lambda x: fmg.pad_to_multiple(x, 4), [image],
                  dynamic=dynamic)
    # 3 -> 4 rows and 5 -> 8 columns, zeros appended at the end.
    assert out.shape == (1, 4, 8, 1)
    np.testing.assert_array_equal(out[:, :3, :5], image)
    assert out[:, 3:].sum() == 0 and out[:, :, 5:].sum() == 0

  def test_pad_to_multiple_keeps_static_shape(self):
    with tf.Graph().as_default():
      image = tf.zeros([2, 33, 64, 3])
      assert fmg.pad_to_multiple(image, 32).shape.as_list() == [2, 64, 64, 3]
      assert fmg.pad_to_multiple(image, 1) is image

  def test_check_min_image_dim_static(self):
    with tf.Graph().as_default():
      image = tf.zeros([1, 33, 40, 3])
      assert fmg.check_min_image_dim(33, image) is image
      with pytest.raises(ValueError, match='image size must be >= 33'):
        fmg.check_min_image_dim(33, tf.zeros([1, 32, 40, 3]))

  def test_check_min_image_dim_dynamic(self, execute):
    check = lambda x: fmg.check_min_image_dim(33, x)
    assert execute(check, [np.zeros([1, 33, 34, 3], np.float32)],
                   dynamic=True).shape == (1, 33, 34, 3)
    with pytest.raises(tf.errors.InvalidArgumentError):
      execute(check, [np.zeros([1, 33, 32, 3], np.float32)], dynamic=True)


def _inception_like_features(batch=2):
  return {'Mixed_4c': tf.ones([batch, 16, 16, 16]),
          'Mixed_5c': tf.ones([batch, 8, 8, 32])}


class TestMultiResolutionFeatureMaps:

  def test_names_and_shapes(self):
    layout = {'from_layer': ['Mixed_4c', 'Mixed_5c', '', '', ''],
              'layer_depth': [-1, -1, 64, 32, 32]}
    with tf.Graph().as_default():
      maps = fmg.multi_resolution_feature_maps(
          layout, depth_multiplier=1.0, min_depth=16, insert_1x1_conv=True,
          image_features=_inception_like_features())
      shapes = {k: v.shape.as_list() for k, v in maps.items()}
      variables = _variable_shapes()
    # New layers are SAME stride-2 convs: 8 -> 4 -> 2 -> 1.
    assert list(shapes.items()) == [
        ('Mixed_4c', [2, 16, 16, 16]),
        ('Mixed_5c', [2, 8, 8, 32]),
        ('Mixed_5c_2_Conv2d_2_3x3_s2_64', [2, 4, 4, 64]),
        ('Mixed_5c_2_Conv2d_3_3x3_s2_32', [2, 2, 2, 32]),
        ('Mixed_5c_2_Conv2d_4_3x3_s2_32', [2, 1, 1, 32])]
    # 1x1 convs have half the depth (64 // 2 = 32, 32 // 2 = 16).
    assert variables == {
        'Mixed_5c_1_Conv2d_2_1x1_32/weights': [1, 1, 32, 32],
        'Mixed_5c_1_Conv2d_2_1x1_32/biases': [32],
        'Mixed_5c_2_Conv2d_2_3x3_s2_64/weights': [3, 3, 32, 64],
        'Mixed_5c_2_Conv2d_2_3x3_s2_64/biases': [64],
        'Mixed_5c_1_Conv2d_3_1x1_16/weights': [1, 1, 64, 16],
        'Mixed_5c_1_Conv2d_3_1x1_16/biases': [16],
        'Mixed_5c_2_Conv2d_3_3x3_s2_32/weights': [3, 3, 16, 32],
        'Mixed_5c_2_Conv2d_3_3x3_s2_32/biases': [32],
        'Mixed_5c_1_Conv2d_4_1x1_16/weights': [1, 1, 32, 16],
        'Mixed_5c_1_Conv2d_4_1x1_16/biases': [16],
        'Mixed_5c_2_Conv2d_4_3x3_s2_32/weights': [3, 3, 16, 32],
        'Mixed_5c_2_Conv2d_4_3x3_s2_32/biases': [32]}

  def test_depth_multiplier_kernel_size_and_no_1x1(self):
    layout = {'from_layer': ['Mixed_5c', '', '', ''],
              'layer_depth': [-1, 512, 256, 64],
              'conv_kernel_size': [-1, 3, 3, 2]}
    with tf.Graph().as_default():
      maps = fmg.multi_resolution_feature_maps(
          layout, depth_multiplier=0.25, min_depth=32, insert_1x1_conv=False,
          image_features=_inception_like_features())
      variables = _variable_shapes()
    # 512 * 0.25 = 128, 256 * 0.25 = 64, 64 * 0.25 = 16 -> min_depth 32.
    assert list(maps) == ['Mixed_5c', 'Mixed_5c_2_Conv2d_1_3x3_s2_128',
                          'Mixed_5c_2_Conv2d_2_3x3_s2_64',
                          'Mixed_5c_2_Conv2d_3_2x2_s2_32']
    assert variables['Mixed_5c_2_Conv2d_3_2x2_s2_32/weights'] == [2, 2, 64, 32]
    assert not any('_1_Conv2d' in name for name in variables)

  def test_depthwise_with_explicit_padding(self):
    layout = {'from_layer': ['Mixed_5c', '', ''],
              'layer_depth': [-1, 64, 32],
              'use_depthwise': True, 'use_explicit_padding': True}
    with tf.Graph().as_default():
      features = {'Mixed_5c': tf.ones([1, 7, 7, 32])}
      maps = fmg.multi_resolution_feature_maps(
          layout, 1.0, 16, True, features)
      shapes = [v.shape.as_list() for v in maps.values()]
      variables = _variable_shapes()
    # 7 padded to 9, VALID 3x3 stride 2: (9 - 3) / 2 + 1 = 4; then
    # 4 -> 6 -> 2 (= ceil(4 / 2), as with SAME).
    assert shapes == [[1, 7, 7, 32], [1, 4, 4, 64], [1, 2, 2, 32]]
    assert variables == {
        'Mixed_5c_1_Conv2d_1_1x1_32/weights': [1, 1, 32, 32],
        'Mixed_5c_1_Conv2d_1_1x1_32/biases': [32],
        'Mixed_5c_2_Conv2d_1_3x3_s2_64_depthwise/depthwise_weights':
            [3, 3, 32, 1],
        'Mixed_5c_2_Conv2d_1_3x3_s2_64_depthwise/biases': [32],
        'Mixed_5c_2_Conv2d_1_3x3_s2_64/weights': [1, 1, 32, 64],
        'Mixed_5c_2_Conv2d_1_3x3_s2_64/biases': [64],
        'Mixed_5c_1_Conv2d_2_1x1_16/weights': [1, 1, 64, 16],
        'Mixed_5c_1_Conv2d_2_1x1_16/biases': [16],
        'Mixed_5c_2_Conv2d_2_3x3_s2_32_depthwise/depthwise_weights':
            [3, 3, 16, 1],
        'Mixed_5c_2_Conv2d_2_3x3_s2_32_depthwise/biases': [16],
        'Mixed_5c_2_Conv2d_2_3x3_s2_32/weights': [1, 1, 16, 32],
        'Mixed_5c_2_Conv2d_2_3x3_s2_32/biases': [32]}

  @pytest.mark.parametrize('use_depthwise', [True, False])
  def test_pool_residual(self, execute, use_depthwise):
    layout = {'from_layer': ['base', ''], 'layer_depth': [-1, 2],
              'use_depthwise': use_depthwise}

    def graph_fn(image):
      with _linear_scope(tf.compat.v1.zeros_initializer()):
        maps = fmg.multi_resolution_feature_maps(
            layout, 1.0, 2, False, {'base': image}, pool_residual=True)
      return list(maps.values())[-1]

    # x[i, j] = 4 i + j in both channels; convs output 0 (zero weights).
    image = np.tile((np.arange(16, dtype=np.float32)).reshape(
        [1, 4, 4, 1]), [1, 1, 1, 2])
    out = execute(graph_fn, [image])
    if use_depthwise:
      # 3x3 stride-2 SAME average pool of the 4x4 input (pads 1 at the end,
      # padding excluded): windows rows/cols {0,1,2} and {2,3}.
      # (0,0): 4 * mean(0,1,2) + mean(0,1,2) = 4 + 1 = 5
      # (0,1): 4 * 1 + mean(2,3) = 6.5; (1,0): 4 * 2.5 + 1 = 11;
      # (1,1): 10 + 2.5 = 12.5.
      expected = np.array([[5, 6.5], [11, 12.5]], np.float32)
    else:
      # As the original, the residual is only added to depthwise layers.
      expected = np.zeros([2, 2], np.float32)
    np.testing.assert_allclose(out[0, :, :, 0], expected)
    np.testing.assert_allclose(out[0, :, :, 1], expected)

  def test_pool_residual_needs_matching_depth(self, execute):
    layout = {'from_layer': ['base', ''], 'layer_depth': [-1, 4],
              'use_depthwise': True}

    def graph_fn(image):
      with _linear_scope(tf.compat.v1.zeros_initializer()):
        maps = fmg.multi_resolution_feature_maps(
            layout, 1.0, 2, False, {'base': image}, pool_residual=True)
      return list(maps.values())[-1]

    # 2 input channels != 4 output channels: no residual, zero output.
    out = execute(graph_fn, [np.ones([1, 4, 4, 2], np.float32)])
    np.testing.assert_array_equal(out, np.zeros([1, 2, 2, 4]))

  def test_bad_layouts(self):
    with tf.Graph().as_default():
      features = _inception_like_features()
      with pytest.raises(ValueError, match='layer_depth'):
        fmg.multi_resolution_feature_maps(
            {'from_layer': ['Mixed_5c', ''], 'layer_depth': [-1]}, 1.0, 16,
            True, features)
      with pytest.raises(ValueError, match='conv_kernel_size'):
        fmg.multi_resolution_feature_maps(
            {'from_layer': ['Mixed_5c', ''], 'layer_depth': [-1, 32],
             'conv_kernel_size': [3]}, 1.0, 16, True, features)
      with pytest.raises(ValueError, match='first from_layer'):
        fmg.multi_resolution_feature_maps(
            {'from_layer': ['', ''], 'layer_depth': [32, 32]}, 1.0, 16,
            True, features)
      with pytest.raises(KeyError):
        fmg.multi_resolution_feature_maps(
            {'from_layer': ['Mixed_9z'], 'layer_depth': [-1]}, 1.0, 16,
            True, features)
      empty = fmg.multi_resolution_feature_maps(
          {'from_layer': [], 'layer_depth': []}, 1.0, 16, True, features)
      assert not empty


def _blocks(shapes):
  return [(name, tf.ones(shape)) for name, shape in shapes]


class TestFpnTopDownFeatureMaps:

  def test_names_and_shapes(self):
    with tf.Graph().as_default():
      with tf.compat.v1.variable_scope('fpn'):
        maps = fmg.fpn_top_down_feature_maps(
            _blocks([('block2', [4, 8, 8, 8]), ('block3', [4, 4, 4, 16]),
                     ('block4', [4, 2, 2, 32])]), depth=16)
      shapes = [(k, v.shape.as_list()) for k, v in maps.items()]
      variables = _variable_shapes()
      op_names = [op.name for op in tf.compat.v1.get_default_graph()
                  .get_operations()]
    assert shapes == [('top_down_block2', [4, 8, 8, 16]),
                      ('top_down_block3', [4, 4, 4, 16]),
                      ('top_down_block4', [4, 2, 2, 16])]
    # Variables follow the variable scope; ops sit under 'top_down'.
    assert variables == {
        'fpn/projection_3/weights': [1, 1, 32, 16],
        'fpn/projection_3/biases': [16],
        'fpn/projection_2/weights': [1, 1, 16, 16],
        'fpn/projection_2/biases': [16],
        'fpn/smoothing_2/weights': [3, 3, 16, 16],
        'fpn/smoothing_2/biases': [16],
        'fpn/projection_1/weights': [1, 1, 8, 16],
        'fpn/projection_1/biases': [16],
        'fpn/smoothing_1/weights': [3, 3, 16, 16],
        'fpn/smoothing_1/biases': [16]}
    assert 'fpn/top_down/nearest_neighbor_upsampling/w_stack' in op_names

  @pytest.mark.parametrize('use_native_resize_op', [False, True])
  def test_values(self, execute, use_native_resize_op):
    def graph_fn(fine, coarse):
      with _linear_scope(_identity_kernel):
        maps = fmg.fpn_top_down_feature_maps(
            [('fine', fine), ('coarse', coarse)], depth=1,
            use_native_resize_op=use_native_resize_op)
      return maps['top_down_fine'], maps['top_down_coarse']

    fine = np.arange(16, dtype=np.float32).reshape([1, 4, 4, 1])
    coarse = np.array([[100, 200], [300, 400]], np.float32).reshape(
        [1, 2, 2, 1])
    fine_out, coarse_out = execute(graph_fn, [fine, coarse])
    # Identity projections/smoothing: coarse map unchanged, fine map is
    # fine + coarse upsampled 2x, e.g. (0, 3): 3 + 200, (3, 0): 12 + 300.
    np.testing.assert_array_equal(coarse_out, coarse)
    expected = fine + coarse.repeat(2, axis=1).repeat(2, axis=2)
    np.testing.assert_array_equal(fine_out, expected)
    assert fine_out[0, 0, 3, 0] == 203 and fine_out[0, 3, 0, 0] == 312

  def test_depthwise_explicit_padding_odd_sizes(self):
    with tf.Graph().as_default():
      maps = fmg.fpn_top_down_feature_maps(
          _blocks([('block2', [2, 7, 7, 8]), ('block3', [2, 4, 4, 16]),
                   ('block4', [2, 2, 2, 32])]), depth=16,
          use_depthwise=True, use_explicit_padding=True)
      shapes = [v.shape.as_list()[1:3] for v in maps.values()]
      variables = _variable_shapes()
    # 4 upsamples to 8 and is cropped to 7; VALID 3x3 on 7 + 2 padding.
    assert shapes == [[7, 7], [4, 4], [2, 2]]
    assert variables['smoothing_1/depthwise_weights'] == [3, 3, 16, 1]
    assert variables['smoothing_1/pointwise_weights'] == [1, 1, 16, 16]
    assert 'smoothing_1/weights' not in variables

  def test_bounded_activations(self, execute):
    def graph_fn(fine, coarse):
      with _linear_scope(_identity_kernel):
        maps = fmg.fpn_top_down_feature_maps(
            [('fine', fine), ('coarse', coarse)], depth=1,
            use_bounded_activations=True, scope='my_fpn')
      graph = tf.compat.v1.get_default_graph()
      clip_ops = sorted(op.name for op in graph.get_operations()
                        if op.type == 'Maximum' or op.type == 'Minimum')
      assert any(name.startswith('my_fpn/clip_by_value') for name in clip_ops)
      return list(maps.values())

    fine = np.full([1, 2, 2, 1], 5.0, np.float32)
    coarse = np.full([1, 1, 1, 1], 10.0, np.float32)
    fine_out, coarse_out = execute(graph_fn, [fine, coarse])
    # coarse: clip(10) = 6; fine: clip(clip(5) + 6) = clip(11) = 6.
    np.testing.assert_array_equal(coarse_out, np.full([1, 1, 1, 1], 6.0))
    np.testing.assert_array_equal(fine_out, np.full([1, 2, 2, 1], 6.0))


class TestFpnPyramidFeatureMaps:

  def _build(self, fpn_min_level, fpn_max_level, **kwargs):
    features = {'b2': tf.ones([1, 16, 16, 8]), 'b3': tf.ones([1, 8, 8, 8]),
                'b4': tf.ones([1, 4, 4, 8]), 'b5': tf.ones([1, 2, 2, 8])}
    return fmg.fpn_pyramid_feature_maps(
        features, ['b2', 'b3', 'b4', 'b5'], fpn_min_level, fpn_max_level,
        depth=16, coarse_layer_name_fn=lambda k: 'extra_%d' % k, **kwargs)

  def test_levels_and_names(self):
    with tf.Graph().as_default():
      maps = self._build(3, 7)
      variables = _variable_shapes()
    # Levels 3, 4, 5 from b3..b5; 6 and 7 are stride-2 convs: 2 -> 1 -> 1.
    assert [m.shape.as_list()[1] for m in maps] == [8, 4, 2, 1, 1]
    assert variables['extra_1/weights'] == [3, 3, 16, 16]
    assert variables['extra_2/weights'] == [3, 3, 16, 16]
    assert 'projection_3/weights' in variables  # b5 is the 3rd input.
    assert 'projection_4/weights' not in variables

  def test_max_level_below_backbone(self):
    with tf.Graph().as_default():
      maps = self._build(2, 4, use_depthwise=True)
      variables = _variable_shapes()
    assert [m.shape.as_list()[1] for m in maps] == [16, 8, 4]
    assert not any(name.startswith('extra') for name in variables)

  @pytest.mark.parametrize('levels', [(1, 7), (6, 7), (4, 3)])
  def test_bad_levels(self, levels):
    with tf.Graph().as_default():
      with pytest.raises(ValueError, match='fpn_min_level'):
        self._build(*levels)


class TestPoolingPyramidFeatureMaps:

  def test_max_pool_values_without_base_conv(self, execute):
    def graph_fn(image):
      maps = fmg.pooling_pyramid_feature_maps(0, 3, {'image': image})
      assert list(maps) == ['Base_Conv2d_1x1_0', 'MaxPool2d_0_2x2',
                            'MaxPool2d_1_2x2']
      return list(maps.values())

    image = np.arange(16, dtype=np.float32).reshape([1, 4, 4, 1])
    base, pool0, pool1 = execute(graph_fn, [image])
    np.testing.assert_array_equal(base, image)
    # 2x2 stride-2 max of x[i, j] = 4 i + j: bottom-right of each window.
    np.testing.assert_array_equal(pool0[0, :, :, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(pool1[0, :, :, 0], [[15]])

  def test_base_conv_names_and_shapes(self):
    with tf.Graph().as_default():
      maps = fmg.pooling_pyramid_feature_maps(
          16, 4, {'image': tf.ones([2, 5, 5, 8])})
      shapes = [(k, v.shape.as_list()) for k, v in maps.items()]
      variables = _variable_shapes()
    # SAME 2x2 stride 2: 5 -> 3 -> 2 -> 1.
    assert shapes == [('Base_Conv2d_1x1_16', [2, 5, 5, 16]),
                      ('MaxPool2d_0_2x2', [2, 3, 3, 16]),
                      ('MaxPool2d_1_2x2', [2, 2, 2, 16]),
                      ('MaxPool2d_2_2x2', [2, 1, 1, 16])]
    assert variables == {'Base_Conv2d_1x1_16/weights': [1, 1, 8, 16],
                         'Base_Conv2d_1x1_16/biases': [16]}

  def test_replace_pool_with_conv(self):
    with tf.Graph().as_default():
      maps = fmg.pooling_pyramid_feature_maps(
          16, 3, {'image': tf.ones([2, 8, 8, 8])},
          replace_pool_with_conv=True)
      shapes = [(k, v.shape.as_list()) for k, v in maps.items()]
      variables = _variable_shapes()
    assert shapes == [('Base_Conv2d_1x1_16', [2, 8, 8, 16]),
                      ('Conv2d_0_3x3_s2_16', [2, 4, 4, 16]),
                      ('Conv2d_1_3x3_s2_16', [2, 2, 2, 16])]
    assert variables['Conv2d_1_3x3_s2_16/weights'] == [3, 3, 16, 16]

  def test_needs_exactly_one_feature_map(self):
    with tf.Graph().as_default():
      with pytest.raises(ValueError, match='length 1'):
        fmg.pooling_pyramid_feature_maps(
            0, 2, {'a': tf.ones([1, 4, 4, 1]), 'b': tf.ones([1, 4, 4, 1])})
      with pytest.raises(ValueError, match='length 1'):
        fmg.pooling_pyramid_feature_maps(0, 2, {})
