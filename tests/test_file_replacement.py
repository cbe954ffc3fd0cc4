"""Every file a command rewrites is replaced in one step, links included.

Each writer's destination is a symbolic link to a file elsewhere (a user's
shared config, an earlier result): the writer must replace the link by its
new file and leave the file elsewhere as it was, as file_safety.write_file
does, never write through the link nor leave its temporary file behind.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator.legacy import configs as legacy_configs
from od_estimator.compat import coco_export
from od_estimator.legacy import evaluation as legacy_evaluation
from od_estimator.metrics import coco_evaluation
from od_estimator.protos import pipeline_pb2
from od_estimator.config import config_util
from od_estimator.metrics import eval_visualization
from od_estimator.utils import visualization_utils

_CATEGORIES = [{'id': 1, 'name': 'square'}]


def _pipeline_config(out, tmp_path):
  del tmp_path
  config = pipeline_pb2.TrainEvalPipelineConfig()
  config.model.ssd.num_classes = 1
  config_util.save_pipeline_config(config, out)


def _legacy_config_copy(out, tmp_path):
  source = tmp_path / 'model.source'
  source.write_text('model { ssd {} }')
  legacy_configs.copy_files([(str(source), 'model.config')], out)


def _coco_detections_json(out, tmp_path):
  del tmp_path
  coco_evaluation.CocoDetectionEvaluator(
      _CATEGORIES).dump_detections_to_json_file(
          os.path.join(out, 'detections.json'))


def _coco_groundtruth_json(out, tmp_path):
  del tmp_path
  coco_export.ExportGroundtruthToCOCO(
      [1], [np.array([[0., 0., 1., 1.]], np.float32)], [np.array([1])],
      _CATEGORIES, output_path=os.path.join(out, 'groundtruth.json'))


def _legacy_eval_image(out, tmp_path):
  del tmp_path
  summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
      tag='image', image=tf.compat.v1.Summary.Image(
          encoded_image_string=b'\x89PNG new'))])
  legacy_evaluation.export_visualizations(
      {eval_visualization.SUMMARY_NAME_PREFIX + '/0':
           summary.SerializeToString()}, out)


def _png(out, tmp_path):
  del tmp_path
  visualization_utils.save_image_array_as_png(
      np.zeros([2, 2, 3], np.uint8), os.path.join(out, 'image.png'))


@pytest.mark.parametrize('writer, name', [
    (_pipeline_config, 'pipeline.config'),
    (_legacy_config_copy, 'model.config'),
    (_coco_detections_json, 'detections.json'),
    (_coco_groundtruth_json, 'groundtruth.json'),
    (_legacy_eval_image, 'export-image-0.png'),
    (_png, 'image.png')])
def test_a_linked_destination_is_replaced_not_written_through(
    tmp_path, writer, name):
  out = tmp_path / 'out'
  out.mkdir()
  elsewhere = tmp_path / 'elsewhere'
  elsewhere.write_bytes(b'precious')
  (out / name).symlink_to(elsewhere)
  writer(str(out), tmp_path)
  assert elsewhere.read_bytes() == b'precious'
  assert not (out / name).is_symlink()
  assert (out / name).stat().st_size > 0
  assert os.listdir(out) == [name]
