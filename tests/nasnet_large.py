"""Facts of the original's NASNet-A large, for the tests of faster_rcnn_nas.

Checked on faster_rcnn_nas_coco.config's graph in
tests/test_upstream_faster_rcnn_configs.py: the whole net is built there
anyway, and its variables' shapes do not depend on the input size.
"""

# Variables of NASNet-A large's cells as the original's
# research/slim/nets/nasnet/nasnet.py and nasnet_utils.py (tensorflow/models)
# build them: conv0 has 32 * stem_multiplier 3 = 96
# filters; stem cells are reduction cells at filter scaling 1/4 (42) and
# 1/2 (84); a reduction cell concatenates 4 states, a normal cell 6;
# reduction cells come before cells 6 and 12 (filters 336, then 672);
# after a reduction, a normal cell's second input is the cell before the
# reduction (skip_reduction_layer_input), matched by factorized_reduction
# (path1_conv / path2_conv of half the filters); a cell's second input is
# first matched to its filters (prev_1x1). The classification heads (the
# auxiliary head on cell 11, final_layer/FC) are not part of the detector:
# tests/nets/test_nasnet.py builds them on a tiny NASNet.
CELL_VARIABLES = {
    'conv0/weights': [3, 3, 3, 96],
    'conv0_bn/moving_variance': [96],
    'cell_stem_0/1x1/weights': [1, 1, 96, 42],
    'cell_stem_0/beginning_bn/gamma': [42],
    'cell_stem_0/comb_iter_0/left/separable_5x5_1/depthwise_weights':
        [5, 5, 42, 1],
    'cell_stem_0/comb_iter_0/right/separable_7x7_1/pointwise_weights':
        [1, 1, 96, 42],
    'cell_stem_0/comb_iter_0/right/bn_sep_7x7_2/beta': [42],
    'cell_stem_0/comb_iter_4/left/separable_3x3_2/pointwise_weights':
        [1, 1, 42, 42],
    'cell_stem_1/path1_conv/weights': [1, 1, 96, 42],
    'cell_stem_1/path2_conv/weights': [1, 1, 96, 42],
    'cell_stem_1/final_path_bn/moving_mean': [84],
    'cell_stem_1/1x1/weights': [1, 1, 168, 84],
    'cell_0/path1_conv/weights': [1, 1, 168, 84],
    'cell_0/1x1/weights': [1, 1, 336, 168],
    'cell_1/prev_1x1/weights': [1, 1, 336, 168],
    'cell_1/prev_bn/gamma': [168],
    'cell_1/comb_iter_1/left/separable_5x5_1/depthwise_weights':
        [5, 5, 168, 1],
    'cell_5/comb_iter_1/right/separable_3x3_2/depthwise_weights':
        [3, 3, 168, 1],
    'reduction_cell_0/1x1/weights': [1, 1, 1008, 336],
    'reduction_cell_0/prev_1x1/weights': [1, 1, 1008, 336],
    'cell_6/path2_conv/weights': [1, 1, 1008, 168],
    'cell_7/prev_1x1/weights': [1, 1, 1344, 336],
    'cell_11/1x1/weights': [1, 1, 2016, 336],
    'reduction_cell_1/1x1/weights': [1, 1, 2016, 672],
    'reduction_cell_1/prev_1x1/weights': [1, 1, 2016, 672],
    'reduction_cell_1/comb_iter_0/right/separable_7x7_1/depthwise_weights':
        [7, 7, 672, 1],
    'cell_12/path1_conv/weights': [1, 1, 2016, 336],
    'cell_17/comb_iter_0/left/separable_5x5_2/pointwise_weights':
        [1, 1, 672, 672],
}
