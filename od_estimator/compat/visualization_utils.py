"""The original's object_detection.utils.visualization_utils, for scripts
written for it.

Nothing in od_estimator imports this module. It gives the numpy drawing of
od_estimator.utils.visualization_utils, the drawing on image tensors and
the plot summaries of visualization_tensors, and the heat maps, part masks
and float channels of visualization_maps.
"""
# The original's names kept in their homes. pylint: disable=unused-import
from od_estimator.compat.visualization_maps import (
    draw_float_channel_on_image_array, draw_heatmaps_on_image,
    draw_heatmaps_on_image_array, draw_part_mask_on_image_array)
from od_estimator.compat.visualization_tensors import (
    VisualizeSingleFrameDetections, add_cdf_image_summary,
    add_hist_image_summary, create_visualization_fn,
    draw_bounding_boxes_on_image_tensors, draw_heatmaps_on_image_tensors)
from od_estimator.utils.visualization_utils import (
    STANDARD_COLORS, draw_bounding_box_on_image,
    draw_bounding_box_on_image_array, draw_bounding_boxes_on_image,
    draw_bounding_boxes_on_image_array, draw_keypoints_on_image,
    draw_keypoints_on_image_array, draw_mask_on_image_array,
    encode_image_array_as_png_str, save_image_array_as_png,
    visualize_boxes_and_labels_on_image_array)
# pylint: enable=unused-import
