"""The variables of the original's released SSD zoo checkpoints.

Lists derived independently from the original's architecture (the slim
MobileNet layer tables, the SSD extra layer naming of
multi_resolution_feature_maps, the FPN scopes and the box predictor
scopes), names the released checkpoints are known to hold, and the checks
of a model built from the same config against them. The SSD config tests
(tests/upstream_ssd.py) run these checks on the graphs they build.
"""

COCO_CLASS_SLOTS = 91  # 90 classes plus background

# ---------------------------------------------------------------------------
# Expected variables, derived from the original's architecture.


def _batch_norm_variables(batch_norm_scope, depth):
  return [(batch_norm_scope + '/' + name, [depth])
          for name in ('gamma', 'beta', 'moving_mean', 'moving_variance')]


def _batch_norm(scope, depth):
  return _batch_norm_variables(scope + '/BatchNorm', depth)


def _conv_bn(scope, kernel):
  """A conv with batch norm and no biases; kernel [h, w, in, out]."""
  return [(scope + '/weights', kernel)] + _batch_norm(scope, kernel[-1])


def _depthwise_bn(scope, size, depth):
  return ([(scope + '/depthwise_weights', [size, size, depth, 1])] +
          _batch_norm(scope, depth))


def _conv_biases(scope, kernel):
  return [(scope + '/weights', kernel), (scope + '/biases', [kernel[-1]])]


# MobileNet v1 depthwise separable layers 1..13: (input, output depth).
_V1_SEPARABLE = [(32, 64), (64, 128), (128, 128), (128, 256), (256, 256),
                 (256, 512)] + [(512, 512)] * 5 + [(512, 1024), (1024, 1024)]


def _mobilenet_v1(scope):
  """MobilenetV1 up to Conv2d_13_pointwise (depth multiplier 1)."""
  variables = _conv_bn(scope + '/Conv2d_0', [3, 3, 3, 32])
  for index, (depth_in, depth_out) in enumerate(_V1_SEPARABLE, start=1):
    layer = '%s/Conv2d_%d' % (scope, index)
    variables += _depthwise_bn(layer + '_depthwise', 3, depth_in)
    variables += _conv_bn(layer + '_pointwise', [1, 1, depth_in, depth_out])
  return variables


# MobileNet v2 inverted residual blocks: (expansion factor, output depth).
_V2_BLOCKS = ([(1, 16)] + [(6, 24)] * 2 + [(6, 32)] * 3 + [(6, 64)] * 4 +
              [(6, 96)] * 3 + [(6, 160)] * 3 + [(6, 320)])


def _mobilenet_v2(scope):
  """MobilenetV2 up to layer_19 (Conv_1), depth multiplier 1."""
  variables = _conv_bn(scope + '/Conv', [3, 3, 3, 32])
  depth_in = 32
  for index, (expansion, depth_out) in enumerate(_V2_BLOCKS):
    block = scope + ('/expanded_conv_%d' % index if index else
                     '/expanded_conv')
    inner = depth_in * expansion
    if expansion > 1:
      variables += _conv_bn(block + '/expand', [1, 1, depth_in, inner])
    variables += _depthwise_bn(block + '/depthwise', 3, inner)
    variables += _conv_bn(block + '/project', [1, 1, inner, depth_out])
    depth_in = depth_out
  return variables + _conv_bn(scope + '/Conv_1', [1, 1, 320, 1280])


def _ssd_extra_layers(scope, base_layer, depth_in, use_depthwise):
  """The four stride-2 layers after `base_layer` (insert_1x1_conv)."""
  variables = []
  for index, depth in enumerate([512, 256, 256, 128], start=2):
    half = depth // 2
    variables += _conv_bn('%s/%s_1_Conv2d_%d_1x1_%d' % (
        scope, base_layer, index, half), [1, 1, depth_in, half])
    layer = '%s/%s_2_Conv2d_%d_3x3_s2_%d' % (scope, base_layer, index, depth)
    if use_depthwise:
      variables += _depthwise_bn(layer + '_depthwise', 3, half)
      variables += _conv_bn(layer, [1, 1, half, depth])
    else:
      variables += _conv_bn(layer, [3, 3, half, depth])
    depth_in = depth
  return variables


def _box_predictors(kernel_size, depths, anchors_per_location):
  """ConvolutionalBoxPredictor heads, one BoxPredictor_<i> per map."""
  variables = []
  for index, (depth, anchors) in enumerate(zip(depths,
                                               anchors_per_location)):
    scope = 'BoxPredictor_%d' % index
    kernel = [kernel_size, kernel_size, depth]
    variables += _conv_biases(scope + '/BoxEncodingPredictor',
                              kernel + [anchors * 4])
    variables += _conv_biases(scope + '/ClassPredictor',
                              kernel + [anchors * COCO_CLASS_SLOTS])
  return variables


# 6 SSD maps: 3 anchors at the lowest (reduce_boxes_in_lowest_layer), then
# 5 aspect ratios + 1 interpolated scale.
_SSD_ANCHORS_PER_LOCATION = [3, 6, 6, 6, 6, 6]
_SSD_MAP_DEPTHS_TAIL = [512, 256, 256, 128]


def _expected_ssd_mobilenet_v1():
  scope = 'FeatureExtractor/MobilenetV1'
  return (_mobilenet_v1(scope) +
          _ssd_extra_layers(scope, 'Conv2d_13_pointwise', 1024, False) +
          _box_predictors(1, [512, 1024] + _SSD_MAP_DEPTHS_TAIL,
                          _SSD_ANCHORS_PER_LOCATION))


def _expected_ssd_mobilenet_v2():
  scope = 'FeatureExtractor/MobilenetV2'
  # layer_15 is expanded_conv_13: 96 * 6 = 576 channels after expansion.
  return (_mobilenet_v2(scope) +
          _ssd_extra_layers(scope, 'layer_19', 1280, True) +
          _box_predictors(3, [576, 1280] + _SSD_MAP_DEPTHS_TAIL,
                          _SSD_ANCHORS_PER_LOCATION))


def _expected_ssd_mobilenet_v1_fpn():
  """FPN levels 3-7 at depth 256, 4-layer weight-shared towers."""
  scope = 'FeatureExtractor/MobilenetV1'
  fpn = scope + '/fpn'
  variables = _mobilenet_v1(scope)
  # Lateral 1x1 projections (biases, no batch norm) of Conv2d_5, 11 and 13.
  for level, depth_in in enumerate([256, 512, 1024], start=1):
    variables += _conv_biases('%s/projection_%d' % (fpn, level),
                              [1, 1, depth_in, 256])
  for level in (1, 2):
    variables += _conv_bn('%s/smoothing_%d' % (fpn, level), [3, 3, 256, 256])
  for index in (14, 15):
    variables += _conv_bn('%s/bottom_up_Conv2d_%d' % (fpn, index),
                          [3, 3, 256, 256])
  predictor = 'WeightSharedConvolutionalBoxPredictor'
  anchors = 6  # 3 aspect ratios x 2 scales per octave
  for tower in ('BoxPredictionTower', 'ClassPredictionTower'):
    for layer in range(4):
      conv = '%s/%s/conv2d_%d' % (predictor, tower, layer)
      # Shared kernel without biases; batch norm per feature map.
      variables.append((conv + '/weights', [3, 3, 256, 256]))
      for feature in range(5):
        variables += _batch_norm_variables(
            '%s/BatchNorm/feature_%d' % (conv, feature), 256)
  variables += _conv_biases(predictor + '/BoxPredictor',
                            [3, 3, 256, anchors * 4])
  variables += _conv_biases(predictor + '/ClassPredictor',
                            [3, 3, 256, anchors * COCO_CLASS_SLOTS])
  return variables


# Entries the released zoo checkpoints hold (ssd_mobilenet_v1_coco,
# ssd_mobilenet_v2_coco, ssd_mobilenet_v1_fpn_shared_box_predictor), with
# 3 anchors x 91 classes at the lowest SSD map and 6 x 91 elsewhere.
ENTRIES = {
    'ssd_mobilenet_v1_coco': [
        ('FeatureExtractor/MobilenetV1/Conv2d_0/weights', [3, 3, 3, 32]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_depthwise/'
         'depthwise_weights', [3, 3, 1024, 1]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise/BatchNorm/'
         'moving_variance', [1024]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_256/'
         'weights', [1, 1, 1024, 256]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_5_3x3_s2_'
         '128/weights', [3, 3, 64, 128]),
        ('FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_5_3x3_s2_'
         '128/BatchNorm/moving_mean', [128]),
        ('BoxPredictor_0/BoxEncodingPredictor/weights', [1, 1, 512, 12]),
        ('BoxPredictor_0/ClassPredictor/biases', [273]),
        ('BoxPredictor_1/ClassPredictor/weights', [1, 1, 1024, 546]),
    ],
    'ssd_mobilenet_v2_coco': [
        ('FeatureExtractor/MobilenetV2/Conv/weights', [3, 3, 3, 32]),
        ('FeatureExtractor/MobilenetV2/expanded_conv/depthwise/'
         'depthwise_weights', [3, 3, 32, 1]),
        ('FeatureExtractor/MobilenetV2/expanded_conv_16/project/weights',
         [1, 1, 960, 320]),
        ('FeatureExtractor/MobilenetV2/Conv_1/BatchNorm/moving_variance',
         [1280]),
        ('FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_2_1x1_256/weights',
         [1, 1, 1280, 256]),
        ('FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512_'
         'depthwise/depthwise_weights', [3, 3, 256, 1]),
        ('FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512/weights',
         [1, 1, 256, 512]),
        ('FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_5_3x3_s2_128/'
         'BatchNorm/gamma', [128]),
        ('BoxPredictor_0/BoxEncodingPredictor/weights', [3, 3, 576, 12]),
        ('BoxPredictor_0/ClassPredictor/biases', [273]),
        ('BoxPredictor_5/ClassPredictor/weights', [3, 3, 128, 546]),
    ],
    'ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync': [
        ('FeatureExtractor/MobilenetV1/Conv2d_5_pointwise/weights',
         [1, 1, 256, 256]),
        ('FeatureExtractor/MobilenetV1/fpn/projection_3/weights',
         [1, 1, 1024, 256]),
        ('FeatureExtractor/MobilenetV1/fpn/smoothing_1/BatchNorm/gamma',
         [256]),
        ('FeatureExtractor/MobilenetV1/fpn/bottom_up_Conv2d_15/weights',
         [3, 3, 256, 256]),
        ('WeightSharedConvolutionalBoxPredictor/BoxPredictionTower/conv2d_3/'
         'BatchNorm/feature_4/moving_variance', [256]),
        ('WeightSharedConvolutionalBoxPredictor/ClassPredictionTower/'
         'conv2d_0/weights', [3, 3, 256, 256]),
        ('WeightSharedConvolutionalBoxPredictor/BoxPredictor/biases', [24]),
        ('WeightSharedConvolutionalBoxPredictor/ClassPredictor/weights',
         [3, 3, 256, 546]),
    ],
}

# config name -> (expected variables, total count, number of anchors).
# Counts: v1 = 135 backbone + 40 extra layers + 24 predictor; v2 = 260 +
# 60 + 24; FPN = 135 + 26 FPN + 8 shared kernels + 160 per-map batch norm
# + 4 heads. Anchors: 19x19x3 + (10x10 + 5x5 + 3x3 + 2x2 + 1x1) x 6 at
# 300x300; (80^2 + 40^2 + 20^2 + 10^2 + 5^2) x 6 at 640x640.
FULL_MODELS = {
    'ssd_mobilenet_v1_coco': (_expected_ssd_mobilenet_v1, 199, 1917),
    'ssd_mobilenet_v2_coco': (_expected_ssd_mobilenet_v2, 344, 1917),
    'ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync': (
        _expected_ssd_mobilenet_v1_fpn, 333, 51150),
}


def check_variables(name, shapes):
  """Every variable name and shape is the original's, none more."""
  expected_fn, expected_count, _ = FULL_MODELS[name]
  expected = dict(expected_fn())
  assert len(expected) == expected_count  # the derivation has no duplicates
  missing = sorted(set(expected) - set(shapes))
  unexpected = sorted(set(shapes) - set(expected))
  wrong_shapes = sorted((n, shapes[n], expected[n]) for n in expected
                        if n in shapes and shapes[n] != expected[n])
  assert (missing, unexpected, wrong_shapes) == ([], [], [])
  assert len(shapes) == expected_count


def check_checkpoint_entries(name, shapes):
  for entry_name, entry_shape in ENTRIES[name]:
    assert shapes.get(entry_name) == entry_shape, entry_name


def check_anchors_and_class_outputs(name, class_shape):
  assert class_shape == [1, FULL_MODELS[name][2], COCO_CLASS_SLOTS]
