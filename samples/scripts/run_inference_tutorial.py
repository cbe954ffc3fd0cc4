r"""Runs an exported model on a folder of images, as the original's
object_detection_tutorial notebook does (its TF1 loop over the frozen
graph), and writes the drawn images and the detections as COCO results.

  python samples/scripts/run_inference_tutorial.py \
    --frozen_graph=exported/frozen_inference_graph.pb \
    --label_map=label_map.pbtxt --image_dir=images --output_dir=out

Writes out/<image>_detections.png, out/detections.json (COCO bbox results,
pixels) and, for mask models, out/segments.json (COCO segm results). The
image ids are the file names without extension.
"""
import glob
import os

import numpy as np
from PIL import Image
import tensorflow as tf

from od_estimator.compat import coco_tools
from od_estimator.compat import ops as utils_ops
from od_estimator.compat import visualization_utils as vis_util
from od_estimator.utils import label_map_util

# The tutorial runs the TF1 graph API.
tf = tf.compat.v1  # pylint: disable=invalid-name
utils_ops.tf = tf

flags = tf.app.flags
flags.DEFINE_string('frozen_graph', '', 'frozen_inference_graph.pb path.')
flags.DEFINE_string('label_map', '', 'Label map path.')
flags.DEFINE_string('image_dir', '', 'Folder of .jpg / .png images.')
flags.DEFINE_string('output_dir', '', 'Where the results go.')
flags.DEFINE_float('min_score_thresh', 0.5, 'Drawing threshold.')
FLAGS = flags.FLAGS


def load_graph(path):
  detection_graph = tf.Graph()
  with detection_graph.as_default():
    od_graph_def = tf.GraphDef()
    with tf.gfile.GFile(path, 'rb') as fid:
      od_graph_def.ParseFromString(fid.read())
      tf.import_graph_def(od_graph_def, name='')
  return detection_graph


def load_image_into_numpy_array(image):
  (im_width, im_height) = image.size
  return np.array(image.convert('RGB').getdata()).reshape(
      (im_height, im_width, 3)).astype(np.uint8)


def run_inference_for_single_image(image, graph, sess):
  """The tutorial's function: output_dict of one [H, W, 3] image."""
  with graph.as_default():
    ops = tf.get_default_graph().get_operations()
    all_tensor_names = {output.name for op in ops for output in op.outputs}
    tensor_dict = {}
    for key in ['num_detections', 'detection_boxes', 'detection_scores',
                'detection_classes', 'detection_masks']:
      tensor_name = key + ':0'
      if tensor_name in all_tensor_names:
        tensor_dict[key] = tf.get_default_graph().get_tensor_by_name(
            tensor_name)
    if 'detection_masks' in tensor_dict:
      # Reframing is required to translate the masks from box coordinates
      # to image coordinates and fit the image size.
      detection_boxes = tf.squeeze(tensor_dict['detection_boxes'], [0])
      detection_masks = tf.squeeze(tensor_dict['detection_masks'], [0])
      real_num_detection = tf.cast(tensor_dict['num_detections'][0],
                                   tf.int32)
      detection_boxes = tf.slice(detection_boxes, [0, 0],
                                 [real_num_detection, -1])
      detection_masks = tf.slice(detection_masks, [0, 0, 0],
                                 [real_num_detection, -1, -1])
      detection_masks_reframed = utils_ops.reframe_box_masks_to_image_masks(
          detection_masks, detection_boxes, image.shape[0], image.shape[1])
      detection_masks_reframed = tf.cast(
          tf.greater(detection_masks_reframed, 0.5), tf.uint8)
      tensor_dict['detection_masks'] = tf.expand_dims(
          detection_masks_reframed, 0)
    image_tensor = tf.get_default_graph().get_tensor_by_name('image_tensor:0')
    output_dict = sess.run(tensor_dict,
                           feed_dict={image_tensor: np.expand_dims(image, 0)})
  # All outputs are float32 numpy arrays, so convert types as appropriate.
  output_dict['num_detections'] = int(output_dict['num_detections'][0])
  count = output_dict['num_detections']
  output_dict['detection_classes'] = output_dict[
      'detection_classes'][0][:count].astype(np.int64)
  output_dict['detection_boxes'] = output_dict['detection_boxes'][0][:count]
  output_dict['detection_scores'] = output_dict['detection_scores'][0][:count]
  if 'detection_masks' in output_dict:
    output_dict['detection_masks'] = output_dict['detection_masks'][0]
  return output_dict


def main(_):
  category_index = label_map_util.create_category_index_from_labelmap(
      FLAGS.label_map, use_display_name=True)
  categories = list(category_index.values())
  graph = load_graph(FLAGS.frozen_graph)
  paths = sorted(glob.glob(os.path.join(FLAGS.image_dir, '*.jpg')) +
                 glob.glob(os.path.join(FLAGS.image_dir, '*.png')))
  tf.gfile.MakeDirs(FLAGS.output_dir)
  image_ids, boxes, scores, classes, masks = [], [], [], [], []
  with tf.Session(graph=graph) as sess:
    for image_path in paths:
      image_np = load_image_into_numpy_array(Image.open(image_path))
      output_dict = run_inference_for_single_image(image_np, graph, sess)
      name = os.path.splitext(os.path.basename(image_path))[0]
      height, width = image_np.shape[:2]
      image_ids.append(name)
      boxes.append(output_dict['detection_boxes'] *
                   np.array([height, width, height, width], np.float32))
      scores.append(output_dict['detection_scores'])
      classes.append(output_dict['detection_classes'])
      if 'detection_masks' in output_dict:
        masks.append(output_dict['detection_masks'][..., np.newaxis])
      vis_util.visualize_boxes_and_labels_on_image_array(
          image_np,
          output_dict['detection_boxes'],
          output_dict['detection_classes'],
          output_dict['detection_scores'],
          category_index,
          instance_masks=output_dict.get('detection_masks'),
          use_normalized_coordinates=True,
          min_score_thresh=FLAGS.min_score_thresh,
          line_thickness=8)
      vis_util.save_image_array_as_png(
          image_np, os.path.join(FLAGS.output_dir, name + '_detections.png'))
      print('%s: %d detections' % (name, output_dict['num_detections']))
  coco_tools.ExportDetectionsToCOCO(
      image_ids, boxes, scores, classes, categories,
      output_path=os.path.join(FLAGS.output_dir, 'detections.json'))
  if masks:
    coco_tools.ExportSegmentsToCOCO(
        image_ids, masks, scores, classes, categories,
        output_path=os.path.join(FLAGS.output_dir, 'segments.json'))


if __name__ == '__main__':
  tf.app.run()
