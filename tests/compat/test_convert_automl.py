"""`od-estimator convert_automl`: automl EfficientDet-D0 checkpoints, hparams.

A checkpoint laid out as automl's training writes it (tests/
automl_checkpoints.py: the recorded names and shapes of its efficientdet-d0
network, moving averages, momentum slots, global_step) converts at 128x128;
our graph of the written pipeline.config restores it with nothing skipped
either way, the config validates, and on the seeded image our scores and
boxes of every anchor, and our detections after NMS, are the ones automl's
network and post-processing computed from the same values
(tests/data/automl/, recorded by running automl's network; see its README).
The hparams cases need no graph.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from od_estimator import __main__ as cli
from od_estimator import errors
from od_estimator import validate
from od_estimator.builders import model_builder
from od_estimator.compat import automl_checkpoint
from od_estimator.compat import automl_config
from od_estimator.compat import automl_hparams
from od_estimator.compat import convert_automl
from od_estimator.config import config_util
from od_estimator.estimator import fine_tune
from od_estimator.utils import variables_helper
from tests import automl_checkpoints
from tests import plain_session
from tests import seeded_values

SIZE = automl_checkpoints.IMAGE_SIZE
RECORDED = os.path.join(automl_checkpoints.FOLDER,
                        'efficientdet-d0.detections.npz')
# Float32 rounding through ~60 layers (scores are probabilities, boxes
# normalized coordinates up to ~10).
TOLERANCE = 1e-4


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  """(output folder, automl checkpoint prefix, {our name: shape}), converted
  by the command."""
  folder = tmp_path_factory.mktemp('automl')
  prefix = automl_checkpoints.write(
      str(folder / 'automl' / 'model'),
      automl_checkpoints.checkpoint_values(automl_checkpoints.variables()))
  records = str(folder / 'records.tfrecord')
  with tf.io.TFRecordWriter(records) as writer:
    writer.write(tf.train.Example().SerializeToString())
  output = str(folder / 'converted')
  assert convert_automl.main([
      '--model_name=efficientdet-d0', '--ckpt=' + os.path.dirname(prefix),
      '--hparams=image_size=%d,var_freeze_expr=(efficientnet|resample_p6)'
      % SIZE, '--output_dir=' + output,
      '--training_file_pattern=%s' % records,
      '--validation_file_pattern=%s' % records]) == 0
  reader = tf.train.load_checkpoint(
      os.path.join(output, convert_automl.CHECKPOINT))
  return output, prefix, reader.get_variable_to_shape_map()


@pytest.fixture(scope='module')
def restored(converted):
  """(restore report, variable names, raw detections) of our graph of the
  converted config on the seeded image."""
  output, _, _ = converted
  configs = config_util.get_configs_from_pipeline_file(
      os.path.join(output, convert_automl.PIPELINE_CONFIG))
  graph = tf.Graph()
  with graph.as_default():
    model = model_builder.build(configs['model'], is_training=False)
    images = tf.constant(seeded_values.image(SIZE, SIZE)[np.newaxis],
                         tf.float32)
    preprocessed, true_shapes = model.preprocess(images)
    detections = model.postprocess(model.predict(preprocessed, true_shapes),
                                   true_shapes)
    matched = fine_tune.match_checkpoint(model, configs['train_config'])
    names = [v.op.name for v in graph.get_collection(
        tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)]
    saver = tf.compat.v1.train.Saver(matched.available)
  with plain_session.session(graph) as sess:
    saver.restore(sess, configs['train_config'].fine_tune_checkpoint)
    outputs = sess.run(detections)
  return matched, names, outputs


def test_our_graph_restores_the_converted_checkpoint_with_nothing_skipped(
    converted, restored):
  _, _, written = converted
  matched, names, _ = restored
  assert (matched.missing, matched.mismatched) == ([], [])
  assert sorted(v.op.name for v in matched.available.values()) == sorted(
      names)
  # Nothing written that the graph does not take.
  assert set(written) == set(names)


def _in_our_anchor_order(values):
  """automl's per-anchor rows in our order within each cell (3x3 anchors)."""
  order = automl_checkpoint.anchor_permutation(3, 3, 1)
  return values.reshape([-1, 9, values.shape[-1]])[:, order].reshape(
      values.shape)


def _recorded():
  with np.load(RECORDED) as recorded:
    return dict(recorded)


def test_scores_and_boxes_of_every_anchor_are_automls(restored):
  _, _, ours = restored
  automl = _recorded()
  np.testing.assert_allclose(ours['raw_detection_scores'][0],
                             _in_our_anchor_order(automl['scores']),
                             rtol=0, atol=TOLERANCE)
  np.testing.assert_allclose(ours['raw_detection_boxes'][0],
                             _in_our_anchor_order(automl['boxes']),
                             rtol=TOLERANCE, atol=TOLERANCE)
  # The reordering is what makes them equal: automl's order is not ours.
  assert np.abs(ours['raw_detection_scores'][0] - automl['scores']).max() > 0.1


def test_detections_are_automls_inside_the_image(restored):
  # automl's per-class soft-NMS (its default nms_configs) keeps the same
  # boxes with the same scores as ours. Ours then clips boxes to the image
  # and drops those left without area (as the original's), which these
  # seeded values make many of; automl keeps them unclipped.
  _, _, ours = restored
  automl = _recorded()
  clipped = np.clip(automl['detection_boxes'], 0.0, 1.0)
  inside = ((clipped[:, 2] - clipped[:, 0]) *
            (clipped[:, 3] - clipped[:, 1])) > 0
  count = int(ours['num_detections'][0])
  scores = ours['detection_scores'][0][:count]
  # Ours down to automl's last score are automl's that stay in the image.
  above = scores >= automl['detection_scores'].min() - TOLERANCE
  assert above.sum() == inside.sum() > 10
  np.testing.assert_allclose(scores[above],
                             automl['detection_scores'][inside], rtol=0,
                             atol=TOLERANCE)
  np.testing.assert_array_equal(
      ours['detection_classes'][0][:count][above] + 1,
      automl['detection_classes'][inside])
  np.testing.assert_allclose(ours['detection_boxes'][0][:count][above],
                             clipped[inside], rtol=0, atol=TOLERANCE)


def test_preprocessing_pads_as_automl(converted):
  # automl normalizes the image, then pads it with zeros, as our SSD
  # preprocessing does.
  output, _, _ = converted
  model_config = config_util.get_configs_from_pipeline_file(
      os.path.join(output, convert_automl.PIPELINE_CONFIG))['model']
  image = seeded_values.image(SIZE * 3 // 4, SIZE)
  with tf.Graph().as_default():
    model = model_builder.build(model_config, is_training=False)
    preprocessed, shapes = model.preprocess(
        tf.constant(image[np.newaxis], tf.float32))
    with tf.compat.v1.Session() as sess:
      ours, shapes = sess.run((preprocessed, shapes))
  mean = np.float32([0.485, 0.456, 0.406]) * 255
  stddev = np.float32([0.229, 0.224, 0.225]) * 255
  automl = np.zeros([SIZE, SIZE, 3], np.float32)
  automl[:image.shape[0]] = (image - mean) / stddev
  assert shapes.tolist() == [[SIZE * 3 // 4, SIZE, 3]]
  np.testing.assert_allclose(ours[0], automl, rtol=0, atol=1e-5)


def test_the_converted_config_validates(converted):
  output, _, _ = converted
  assert validate.main(['--pipeline_config_path', os.path.join(
      output, convert_automl.PIPELINE_CONFIG)]) == 0


def test_moving_averages_are_taken_unless_asked_otherwise(converted):
  output, prefix, written = converted
  geometry = convert_automl._geometry(  # pylint: disable=protected-access
      automl_hparams.resolve('efficientdet-d0', {}), 'efficientdet-d0')
  raw, averaged = automl_checkpoint.converted_values(
      prefix, written, geometry, use_moving_averages=False)
  assert averaged == 0
  reader = tf.train.load_checkpoint(os.path.join(output,
                                                 convert_automl.CHECKPOINT))
  source = 'efficientnet-b0/stem/conv2d/kernel'
  np.testing.assert_array_equal(raw['stem_conv2d/kernel'],
                                automl_checkpoints.value(source, [3, 3, 3,
                                                                  32]))
  np.testing.assert_array_equal(
      reader.get_tensor('stem_conv2d/kernel'),
      automl_checkpoints.value(source + automl_checkpoints.EMA,
                               [3, 3, 3, 32]))
  # The fast-attention scalars of a node are our combine weights.
  combine = reader.get_tensor(
      'EfficientDet-D0/bifpn/node_06/1_up_lvl_4/combine/bifpn_combine_weights')
  np.testing.assert_array_equal(combine[:, 0], [
      automl_checkpoints.value(
          'fpn_cells/cell_0/fnode4/WSM%s%s' % (suffix,
                                              automl_checkpoints.EMA), [])
      for suffix in ('', '_1', '_2')])


def test_var_freeze_expr_freezes_the_same_layers(converted, restored):
  output, _, _ = converted
  _, names, _ = restored
  train_config = config_util.get_configs_from_pipeline_file(os.path.join(
      output, convert_automl.PIPELINE_CONFIG))['train_config']

  class Named:  # what filter_variables reads of a variable
    def __init__(self, name):
      self.op = self
      self.name = name

  kept = variables_helper.filter_variables(
      [Named(name) for name in names], train_config.freeze_variables,
      search=True)
  frozen = set(names) - {v.name for v in kept}
  # automl's expression: its backbone and the resample below the BiFPN.
  assert frozen == {name for name in names
                    if name.startswith(('stem_', 'stack_')) or
                    name.startswith('EfficientDet-D0/bifpn/node_00/')}
  # Whole folders in one expression each.
  assert len(train_config.freeze_variables) == 10


def test_freeze_expressions_name_whole_folders_once():
  names = ['a/x', 'a/y', 'b/x', 'b/y', 'c', 'd/e/x', 'd/e/y', 'd/f']
  expressions = automl_checkpoint.freeze_expressions(
      ['a/x', 'a/y', 'b/x', 'c', 'd/e/x', 'd/e/y'], names)
  assert expressions == ['^a/', '^b/x$', '^c$', '^d/e/']
  assert automl_checkpoint.freeze_expressions([], names) == []


def _shapes_and_geometry(converted):
  _, prefix, written = converted
  geometry = convert_automl._geometry(  # pylint: disable=protected-access
      automl_hparams.resolve('efficientdet-d0', {}), 'efficientdet-d0')
  return prefix, written, geometry


def test_a_checkpoint_of_another_network_is_refused(converted, tmp_path):
  prefix, written, geometry = _shapes_and_geometry(converted)
  lines = automl_checkpoints.variables()
  extra = automl_checkpoints.write(
      str(tmp_path / 'extra'), automl_checkpoints.checkpoint_values(
          lines + [('efficientnet-b0/head/conv2d/kernel', [1, 1, 320, 1280])],
          with_training_state=False))
  with pytest.raises(errors.UserInputError, match='1 model value.*head'):
    automl_checkpoint.converted_values(extra, written, geometry)
  missing = automl_checkpoints.write(
      str(tmp_path / 'missing'), automl_checkpoints.checkpoint_values(
          lines[1:], with_training_state=False))
  with pytest.raises(errors.UserInputError,
                     match='no efficientnet-b0/stem/conv2d/kernel'):
    automl_checkpoint.converted_values(missing, written, geometry)
  # A class head for 3 classes, automl's for 90.
  head = ('WeightSharedConvolutionalBoxPredictor/'
          'WeightSharedConvolutionalClassHead/ClassPredictor/')
  three = dict(written, **{head + 'pointwise_kernel': [1, 1, 64, 27],
                           head + 'bias': [27]})
  with pytest.raises(errors.UserInputError, match='num_classes'):
    automl_checkpoint.converted_values(prefix, three,
                                       geometry._replace(num_classes=3))
  keras = tf.train.Checkpoint(kernel=tf.Variable([1.0])).write(
      str(tmp_path / 'keras' / 'ckpt'))
  with pytest.raises(errors.UserInputError, match='object-based'):
    automl_checkpoint.converted_values(keras, written, geometry)


def test_hparams_strings_and_yaml_files(tmp_path):
  assert automl_hparams.parse('') == {}
  assert automl_hparams.parse(
      'num_classes=20,nms_configs.method=hard,nms_configs.iou_thresh=0.6,'
      'input_rand_hflip=false,label_map=voc') == {
          'num_classes': 20, 'input_rand_hflip': False, 'label_map': 'voc',
          'nms_configs': {'method': 'hard', 'iou_thresh': 0.6}}
  path = tmp_path / 'voc.yaml'
  path.write_text('num_classes: 20\nlabel_map: {1: cat, 2: dog}\n')
  assert automl_hparams.parse(str(path)) == {
      'num_classes': 20, 'label_map': {1: 'cat', 2: 'dog'}}
  with pytest.raises(errors.UserInputError, match='not key=value'):
    automl_hparams.parse('num_classes')
  with pytest.raises(errors.UserInputError, match='cannot read'):
    automl_hparams.parse(str(tmp_path / 'missing.yaml'))


def _config(overrides, **training):
  hparams = automl_hparams.resolve('efficientdet-d0', overrides)
  return config_util.parse_pipeline_text(automl_config.pipeline_text(
      hparams, 'model.ckpt', 'label_map.pbtxt', **training))


def test_hparams_map_to_our_fields():
  config = _config({'num_classes': 20, 'image_size': 640,
                    'aspect_ratios': [[1.0, 1.0], [2.0, 0.5]],
                    'fpn_weight_method': 'sum', 'alpha': 0.5, 'gamma': 2.0,
                    'delta': 0.2, 'box_loss_weight': 10.0,
                    'nms_configs': {'method': 'hard'},
                    'learning_rate': 0.1, 'lr_warmup_init': 0.01,
                    'num_epochs': 10, 'moving_average_decay': 0.999},
                   batch_size=128, examples_per_epoch=1280)
  ssd = config.model.ssd
  assert ssd.num_classes == 20 and not ssd.add_background_class
  coder = ssd.box_coder.faster_rcnn_box_coder
  assert (coder.y_scale, coder.x_scale, coder.height_scale,
          coder.width_scale) == (1, 1, 1, 1)
  anchors = ssd.anchor_generator.multiscale_anchor_generator
  assert list(anchors.aspect_ratios) == [1.0, 4.0]
  resizer = ssd.image_resizer.keep_aspect_ratio_resizer
  assert (resizer.min_dimension, resizer.max_dimension) == (640, 640)
  assert resizer.pad_to_max_dimension and not resizer.per_channel_pad_value
  assert ssd.feature_extractor.bifpn.combine_method == 'sum'
  focal = ssd.loss.classification_loss.weighted_sigmoid_focal
  assert (focal.alpha, focal.gamma) == (0.5, 2.0)
  assert ssd.loss.localization_loss.weighted_smooth_l1.delta == (
      pytest.approx(0.2))
  assert ssd.loss.localization_weight == 10.0
  nms = ssd.post_processing.batch_non_max_suppression
  assert (nms.iou_threshold, nms.soft_nms_sigma, nms.score_threshold) == (
      0.5, 0.0, float('-inf'))
  train = config.train_config
  schedule = train.optimizer.momentum_optimizer.learning_rate
  cosine = schedule.cosine_decay_learning_rate
  # automl scales the rate by batch / 64; an epoch is 1280 / 128 steps.
  assert cosine.learning_rate_base == pytest.approx(0.2)
  assert (cosine.total_steps, cosine.warmup_steps) == (100, 10)
  assert train.optimizer.moving_average_decay == pytest.approx(0.999)
  assert train.batch_size == 128
  with pytest.raises(errors.UserInputError, match='lr_warmup_init'):
    _config({}, batch_size=2)
  # automl's 'WxH' image size, when square.
  assert _config({'image_size': '256x256'}).model.ssd.image_resizer.\
      keep_aspect_ratio_resizer.max_dimension == 256
  # automl's defaults: soft-NMS of sigma 0.5 (0.25 in TF's terms).
  default = _config({}).model.ssd.post_processing.batch_non_max_suppression
  assert (default.soft_nms_sigma, default.iou_threshold) == (
      0.25, pytest.approx(0.3))


@pytest.mark.parametrize('model_name,overrides,message', [
    ('efficientdet-d1', {}, 'efficientdet-d1'),
    ('efficientdet-d0', {'no_such_key': 1}, 'unknown key.*no_such_key'),
    ('efficientdet-d0', {'label_smoothing': 0.1}, 'label_smoothing'),
    ('efficientdet-d0', {'survival_prob': 0.8}, 'survival_prob'),
    ('efficientdet-d0', {'act_type': 'relu'}, 'act_type'),
    ('efficientdet-d0', {'image_size': 500}, 'image_size.*128'),
    ('efficientdet-d0', {'image_size': '640x320'}, 'image_size'),
    ('efficientdet-d0', {'aspect_ratios': [[1.4, 0.7]]}, 'width \\* height'),
    ('efficientdet-d0', {'lr_decay_method': 'stepwise'}, 'lr_decay_method'),
    ('efficientdet-d0', {'fpn_weight_method': 'channel_attn'},
     'fpn_weight_method'),
    ('efficientdet-d0', {'separable_conv': False}, 'separable_conv'),
    ('efficientdet-d0', {'nms_configs': {'max_nms_inputs': 5000}},
     'max_nms_inputs'),
    ('efficientdet-d0', {'nms_configs': {'method': 'linear'}},
     'nms_configs.method'),
])
def test_hparams_without_a_counterpart_are_refused(model_name, overrides,
                                                   message):
  with pytest.raises(errors.UserInputError, match=message):
    automl_hparams.resolve(model_name, overrides)


def test_label_maps():
  assert automl_hparams.label_map_items('voc')[:2] == [(1, 'aeroplane'),
                                                      (2, 'bicycle')]
  coco = automl_hparams.label_map_items(None)
  assert (len(coco), coco[0], coco[-1]) == (80, (1, 'person'),
                                            (90, 'toothbrush'))
  assert automl_hparams.label_map_items({'2': 'dog', 1: 'cat'}) == [
      (1, 'cat'), (2, 'dog')]
  with pytest.raises(errors.UserInputError, match='label_map'):
    automl_hparams.label_map_items('waymo')
  assert 'id: 2\n  name: "dog"' in automl_config.label_map_text(
      [(2, 'dog')])


def test_the_command_is_listed_and_refuses_in_one_line(capsys, tmp_path):
  assert cli.main(['--help']) == 0
  assert 'convert_automl' in capsys.readouterr().out
  with pytest.raises(SystemExit) as done:
    cli.main(['convert_automl', '--help'])
  assert done.value.code == 0
  assert '--hparams' in capsys.readouterr().out
  assert cli.main(['convert_automl', '--model_name=efficientdet-d1',
                   '--ckpt=%s' % tmp_path,
                   '--output_dir=%s' % (tmp_path / 'out')]) == 1
  error = capsys.readouterr().err
  assert error.count('\n') == 1 and 'efficientdet-d1' in error
  assert not (tmp_path / 'out').exists()
