"""`od-estimator detect` on a SavedModel exported from a tiny fake SSD.

The model is SSDMetaArch with the fake feature extractor of tests/fakes.py
(registered as 'fake_ssd', as tests/export/test_exporter.py does) and freshly
initialized weights. Reference detections come from the frozen graph of the
same export, converted to COCO boxes with numpy.
"""
import io
import json
import os
import signal

import numpy as np
from PIL import Image
from pycocotools.coco import COCO
import pytest
import tensorflow as tf
from google.protobuf import text_format

from od_estimator import __main__ as cli
from od_estimator import detect
from od_estimator import errors
from od_estimator.export import exporter
from od_estimator.inference import exported_model
from od_estimator.builders import model_builder
from od_estimator.models import ssd_feature_extractor_registry
from od_estimator.protos import pipeline_pb2
from tests import fakes

MAX_DETECTIONS = 5
PIPELINE = """
model { ssd {
  num_classes: 3
  image_resizer { fixed_shape_resizer { height: 32 width: 32 } }
  feature_extractor { type: "fake_ssd" depth_multiplier: 1.0 min_depth: 8
    num_layers: 2
    conv_hyperparams { activation: RELU_6
      initializer { truncated_normal_initializer { stddev: 0.3 } }
      regularizer { l2_regularizer { weight: 0.0 } } } }
  box_coder { faster_rcnn_box_coder {} }
  matcher { argmax_matcher {} }
  similarity_calculator { iou_similarity {} }
  anchor_generator { ssd_anchor_generator { num_layers: 2 min_scale: 0.2
                     max_scale: 0.95 aspect_ratios: [1.0] } }
  box_predictor { convolutional_box_predictor { kernel_size: 1
    conv_hyperparams { activation: RELU_6
      initializer { truncated_normal_initializer { stddev: 0.3 } }
      regularizer { l2_regularizer { weight: 0.0 } } } } }
  loss { classification_loss { weighted_sigmoid {} }
         localization_loss { weighted_smooth_l1 {} } }
  post_processing {
    batch_non_max_suppression { score_threshold: 0.0 iou_threshold: 1.0
      max_detections_per_class: 5 max_total_detections: 5 }
    score_converter: SIGMOID
  }
} }
"""
LABEL_MAP = """
item { id: 1 name: 'circle' }
item { id: 2 name: 'square' }
item { id: 3 name: 'triangle' }
"""
# Two readable images (their stems are the COCO image ids 7 and 12) and a
# file with an image extension that is not an image.
IMAGES = {'000007.png': (48, 40), '12.png': (30, 64)}
CORRUPT = 'broken.jpg'


@pytest.fixture(scope='module')
def export_dir(tmp_path_factory):
  """Exports the fake SSD with fresh weights; returns the export dir."""
  root = tmp_path_factory.mktemp('detect_export')
  config = text_format.Merge(PIPELINE, pipeline_pb2.TrainEvalPipelineConfig())
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS,
                  'fake_ssd', fakes.FakeSSDFeatureExtractor)
    with tf.Graph().as_default():
      model = model_builder.build(config.model, is_training=False,
                                  add_summaries=False)
      model.predict(*model.preprocess(tf.zeros([1, 32, 32, 3])))
      tf.compat.v1.train.get_or_create_global_step()
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        prefix = tf.compat.v1.train.Saver().save(
            sess, str(root / 'train' / 'model.ckpt'))
    exporter.export_inference_graph('image_tensor', config, prefix,
                                    str(root / 'export'))
  return str(root / 'export')


@pytest.fixture(scope='module')
def inputs(tmp_path_factory):
  """A folder with the two PNGs, the corrupt file and a non-image file."""
  folder = tmp_path_factory.mktemp('detect_inputs')
  rng = np.random.RandomState(3)
  images = {}
  for name, (height, width) in IMAGES.items():
    images[name] = rng.randint(0, 256, [height, width, 3]).astype(np.uint8)
    Image.fromarray(images[name]).save(str(folder / name))
  (folder / CORRUPT).write_bytes(b'\xff\xd8 not really a jpeg')
  (folder / 'notes.txt').write_text('ignored: not an image extension')
  label_map = folder.parent / 'label_map.pbtxt'
  label_map.write_text(LABEL_MAP)
  return {'folder': str(folder), 'images': images,
          'label_map': str(label_map)}


@pytest.fixture(scope='module')
def run(export_dir, inputs, tmp_path_factory):
  """Runs the CLI once on the folder; returns exit code, stderr, outputs."""
  out = str(tmp_path_factory.mktemp('detect_out'))
  messages = []
  with pytest.MonkeyPatch.context() as patch:
    # Collect what main prints on stderr (capsys is function-scoped).
    stderr = io.StringIO()
    patch.setattr('sys.stderr', stderr)
    code = cli.main(['detect',
                     '--saved_model_dir=' + os.path.join(export_dir,
                                                         'saved_model'),
                     '--label_map_path=' + inputs['label_map'],
                     '--input=' + inputs['folder'], '--output_dir=' + out,
                     '--min_score_threshold=0', '--max_boxes=4'])
    messages = stderr.getvalue()
  with open(os.path.join(out, detect.DETECTIONS_FILE)) as f:
    detections = json.load(f)
  return {'code': code, 'stderr': messages, 'out': out,
          'detections': detections}


def _reference_detections(export_dir, image):
  """The frozen graph's outputs for one image, as numpy."""
  graph_def = tf.compat.v1.GraphDef()
  with open(os.path.join(export_dir, 'frozen_inference_graph.pb'), 'rb') as f:
    graph_def.ParseFromString(f.read())
  with tf.Graph().as_default() as graph:
    tf.compat.v1.import_graph_def(graph_def, name='')
    with tf.compat.v1.Session(graph=graph) as sess:
      boxes, scores, classes = sess.run(
          ['detection_boxes:0', 'detection_scores:0', 'detection_classes:0'],
          feed_dict={'image_tensor:0': image[np.newaxis]})
  return boxes[0], scores[0], classes[0]


def test_corrupt_image_is_named_and_fails_the_run(run, inputs):
  assert run['code'] == 1
  warnings = [line for line in run['stderr'].splitlines()
              if line.startswith('warning:')]
  assert len(warnings) == 1
  assert os.path.join(inputs['folder'], CORRUPT) in warnings[0]
  assert '1 image(s) could not be read' in run['stderr']


def test_json_is_coco_results_of_the_model(run, inputs, export_dir):
  by_image = {}
  for result in run['detections']:
    assert set(result) == {'image_id', 'category_id', 'bbox', 'score'}
    by_image.setdefault(result['image_id'], []).append(result)
  assert sorted(by_image) == [7, 12]  # From the stems 000007 and 12.
  # A box model: no segm results file.
  assert not os.path.exists(os.path.join(run['out'], detect.SEGM_FILE))
  for name, image_id in (('000007.png', 7), ('12.png', 12)):
    image = inputs['images'][name]
    height, width = image.shape[:2]
    boxes, scores, classes = _reference_detections(export_dir, image)
    # Score threshold 0 keeps all 5; --max_boxes=4 keeps the first 4.
    boxes, scores, classes = boxes[:4], scores[:4], classes[:4]
    expected_bbox = np.stack([boxes[:, 1] * width, boxes[:, 0] * height,
                              (boxes[:, 3] - boxes[:, 1]) * width,
                              (boxes[:, 2] - boxes[:, 0]) * height], axis=1)
    got = by_image[image_id]
    np.testing.assert_allclose([r['bbox'] for r in got], expected_bbox,
                               atol=1e-3)
    np.testing.assert_allclose([r['score'] for r in got], scores, atol=1e-5)
    assert [r['category_id'] for r in got] == classes.astype(int).tolist()
    assert set(r['category_id'] for r in got) <= {1, 2, 3}


def test_json_loads_in_pycocotools(run):
  groundtruth = COCO()
  groundtruth.dataset = {
      'images': [{'id': 7, 'file_name': '000007.png', 'height': 48,
                  'width': 40},
                 {'id': 12, 'file_name': '12.png', 'height': 30,
                  'width': 64}],
      'annotations': [{'id': 1, 'image_id': 7, 'category_id': 1,
                       'bbox': [2, 3, 10, 12], 'area': 120, 'iscrowd': 0}],
      'categories': [{'id': 1, 'name': 'circle'}, {'id': 2, 'name': 'square'},
                     {'id': 3, 'name': 'triangle'}],
  }
  groundtruth.createIndex()
  results = groundtruth.loadRes(os.path.join(run['out'],
                                             detect.DETECTIONS_FILE))
  assert len(results.getAnnIds()) == 8  # 4 boxes for each of 2 images.
  assert len(results.getAnnIds(imgIds=[12])) == 4


def test_image_id_map_is_written(run):
  with open(os.path.join(run['out'], detect.IMAGE_IDS_FILE)) as f:
    assert json.load(f) == {'000007.png': 7, '12.png': 12}


def test_annotated_images_differ_where_boxes_are_drawn(run, inputs):
  outputs = sorted(name for name in os.listdir(run['out'])
                   if name.endswith('.png'))
  assert outputs == ['000007_detections.png', '12_detections.png']
  for name in IMAGES:
    original = inputs['images'][name]
    annotated = np.array(Image.open(os.path.join(
        run['out'], os.path.splitext(name)[0] + '_detections.png')))
    assert annotated.shape == original.shape
    assert annotated.dtype == np.uint8
    changed = np.any(annotated != original, axis=-1)
    assert changed.any()
    assert not changed.all()  # Lines and labels, not a repaint.


def test_single_file_and_export_dir(export_dir, inputs, tmp_path):
  code = detect.main(['--saved_model_dir=' + export_dir,  # Parent dir too.
                      '--label_map_path=' + inputs['label_map'],
                      '--input=' + os.path.join(inputs['folder'], '12.png'),
                      '--output_dir=' + str(tmp_path),
                      '--min_score_threshold=1.1'])
  assert code == 0
  with open(str(tmp_path / detect.DETECTIONS_FILE)) as f:
    assert json.load(f) == []  # No score reaches 1.1.
  annotated = np.array(Image.open(str(tmp_path / '12_detections.png')))
  np.testing.assert_array_equal(annotated, inputs['images']['12.png'])


def test_missing_model_dir_is_one_line(inputs, tmp_path, capsys):
  code = detect.main(['--saved_model_dir=' + str(tmp_path / 'nope'),
                      '--label_map_path=' + inputs['label_map'],
                      '--input=' + inputs['folder']])
  assert code == 1
  err = capsys.readouterr().err
  assert err.strip().count('\n') == 0
  assert 'saved model directory not found' in err
  assert str(tmp_path / 'nope') in err


def test_bad_label_map_and_input_are_one_line(export_dir, inputs, tmp_path,
                                              capsys):
  code = detect.main(['--saved_model_dir=' + export_dir,
                      '--label_map_path=' + str(tmp_path / 'missing.pbtxt'),
                      '--input=' + inputs['folder']])
  assert code == 1
  err = capsys.readouterr().err
  assert err.strip().count('\n') == 0 and 'missing.pbtxt' in err
  code = detect.main(['--saved_model_dir=' + export_dir,
                      '--label_map_path=' + inputs['label_map'],
                      '--input=' + str(tmp_path)])  # An empty folder.
  assert code == 1
  err = capsys.readouterr().err
  assert err.strip().count('\n') == 0 and 'no images' in err


def test_negative_max_boxes_is_refused(capsys):
  # Read as "no limit" by users, it kept no detection and exited 0.
  with pytest.raises(SystemExit) as raised:
    detect.main(['--saved_model_dir=m', '--label_map_path=l', '--input=i',
                 '--max_boxes=-1'])
  assert raised.value.code == 2
  assert ('argument --max_boxes: must be at least 1, got -1' in
          capsys.readouterr().err)


def test_help_documents_the_exit_code(capsys):
  with pytest.raises(SystemExit):
    cli.main(['detect', '--help'])
  out = ' '.join(capsys.readouterr().out.split())  # Undo line wrapping.
  assert 'exit status' in out and 'could not be read' in out
  assert detect.DETECTIONS_FILE in out


@pytest.fixture(scope='module')
def string_exports(export_dir):
  """The same checkpoint exported with the two string input types."""
  root = os.path.dirname(export_dir)
  config = text_format.Merge(PIPELINE, pipeline_pb2.TrainEvalPipelineConfig())
  exports = {}
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS,
                  'fake_ssd', fakes.FakeSSDFeatureExtractor)
    for input_type in ('encoded_image_string_tensor', 'tf_example'):
      exports[input_type] = os.path.join(root, 'export_' + input_type)
      exporter.export_inference_graph(
          input_type, config, os.path.join(root, 'train', 'model.ckpt'),
          exports[input_type])
  return exports


def _detect_one(saved_model_dir, inputs, out, *flags):
  code = detect.main(['--saved_model_dir=' + saved_model_dir,
                      '--label_map_path=' + inputs['label_map'],
                      '--input=' + os.path.join(inputs['folder'], '12.png'),
                      '--output_dir=' + str(out),
                      '--min_score_threshold=0'] + list(flags))
  with open(os.path.join(str(out), detect.DETECTIONS_FILE)) as f:
    return code, json.load(f)


@pytest.mark.parametrize('input_type', ['encoded_image_string_tensor',
                                        'tf_example'])
def test_every_export_input_type(string_exports, export_dir, inputs, tmp_path,
                                 input_type):
  code, got = _detect_one(string_exports[input_type], inputs,
                          tmp_path / input_type)
  assert code == 0
  _, expected = _detect_one(export_dir, inputs, tmp_path / 'image_tensor')
  assert len(got) == len(expected) == MAX_DETECTIONS
  np.testing.assert_allclose([r['bbox'] for r in got],
                             [r['bbox'] for r in expected], atol=1e-3)
  np.testing.assert_allclose([r['score'] for r in got],
                             [r['score'] for r in expected], atol=1e-5)


def test_coco_annotations_give_the_image_ids(export_dir, inputs, tmp_path,
                                             capsys):
  annotations = tmp_path / 'instances_val.json'
  # file_name may carry a folder; images match by base name.
  annotations.write_text(json.dumps({
      'images': [{'id': 397133, 'file_name': 'val/000007.png', 'height': 48,
                  'width': 40}],
      'annotations': [{'id': 1, 'image_id': 397133, 'category_id': 1,
                       'bbox': [2, 3, 10, 12], 'area': 120, 'iscrowd': 0}],
      'categories': [{'id': 1, 'name': 'circle'}, {'id': 2, 'name': 'square'},
                     {'id': 3, 'name': 'triangle'}]}))
  out = tmp_path / 'out'
  code = detect.main(['--saved_model_dir=' + export_dir,
                      '--label_map_path=' + inputs['label_map'],
                      '--input=' + inputs['folder'], '--output_dir=' + str(out),
                      '--min_score_threshold=0',
                      '--coco_annotations=' + str(annotations)])
  captured = capsys.readouterr()
  assert code == 1  # The corrupt file of the folder.
  detections_path = str(out / detect.DETECTIONS_FILE)
  with open(detections_path) as f:
    results = json.load(f)
  assert {r['image_id'] for r in results} == {397133}
  assert {r['category_id'] for r in results} <= {1, 2, 3}
  # 12.png is not in the annotations: named, drawn, left out of the json.
  assert any('12.png is not among the images' in line
             for line in captured.err.splitlines())
  assert os.path.exists(str(out / '12_detections.png'))
  assert captured.out.strip().splitlines()[-1] == (
      'od-estimator detect: 2 image(s), %d detection(s) -> %s' % (
          MAX_DETECTIONS, detections_path))
  groundtruth = COCO(str(annotations))
  scored = groundtruth.loadRes(detections_path)
  assert len(scored.getAnnIds(imgIds=[397133])) == MAX_DETECTIONS


def test_image_id_map_file(export_dir, inputs, tmp_path):
  id_map = tmp_path / 'ids.json'
  id_map.write_text(json.dumps({'12.png': 'val-12'}))
  code, results = _detect_one(export_dir, inputs, tmp_path / 'out',
                              '--image_id_map=' + str(id_map))
  assert code == 0
  assert {r['image_id'] for r in results} == {'val-12'}


def test_bad_annotations_file_is_one_line(export_dir, inputs, tmp_path,
                                          capsys):
  bad = tmp_path / 'instances.json'
  bad.write_text('{"annotations": []}')
  code = detect.main(['--saved_model_dir=' + export_dir,
                      '--label_map_path=' + inputs['label_map'],
                      '--input=' + inputs['folder'],
                      '--coco_annotations=' + str(bad)])
  assert code == 1
  err = capsys.readouterr().err
  assert err.strip().count('\n') == 0 and str(bad) in err


def test_ctrl_c_stops_after_the_image_under_way(export_dir, inputs, tmp_path,
                                                capsys, monkeypatch):
  detect_image = exported_model.SavedModelDetector.detect
  seen = []

  def detect_then_signal(self, *args):
    seen.append(args[-1])
    if len(seen) == 2:
      os.kill(os.getpid(), signal.SIGINT)
    return detect_image(self, *args)

  monkeypatch.setattr(exported_model.SavedModelDetector, 'detect',
                      detect_then_signal)
  before = signal.getsignal(signal.SIGINT)
  out = str(tmp_path / 'out')
  code = detect.main(['--saved_model_dir=' + export_dir,
                      '--label_map_path=' + inputs['label_map'],
                      '--input=' + inputs['folder'], '--output_dir=' + out])
  assert code == 130
  assert seen == sorted(IMAGES)
  assert capsys.readouterr().err == (
      'od-estimator detect: Ctrl-C: detect stopped; 1 of 3 image(s) done, '
      'drawn in %s; no %s was written\n' % (out, detect.DETECTIONS_FILE))
  assert os.listdir(out) == ['000007_detections.png']
  assert signal.getsignal(signal.SIGINT) == before


def test_multi_line_user_errors_are_one_line_in_detect(capsys, monkeypatch):
  def run(*args, **kwargs):
    del args, kwargs  # Unused.
    raise detect.DetectError('cannot load\n  the model')
  monkeypatch.setattr(detect, 'run', run)
  assert detect.main(['--saved_model_dir=m', '--label_map_path=l',
                      '--input=i']) == 1
  assert capsys.readouterr().err == (
      'od-estimator detect: error: cannot load the model\n')


def test_label_map_errors_name_the_flag_and_bugs_keep_their_type(
    export_dir, inputs, tmp_path, monkeypatch):
  with pytest.raises(detect.DetectError,
                     match='^--label_map_path: .*missing.pbtxt: label map '
                     'file not found'):
    detect.run(export_dir, str(tmp_path / 'missing.pbtxt'), inputs['folder'],
               output_dir=str(tmp_path / 'out'))

  def broken(*args, **kwargs):
    del args, kwargs  # Unused.
    raise ValueError('a bug, not a bad label map')
  monkeypatch.setattr(detect.label_map_util,
                      'create_category_index_from_labelmap', broken)
  with pytest.raises(ValueError) as raised:
    detect.run(export_dir, inputs['label_map'], inputs['folder'],
               output_dir=str(tmp_path / 'out'))
  assert not isinstance(raised.value, errors.UserInputError)
