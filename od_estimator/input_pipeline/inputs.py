"""Input functions for the Estimator: TFRecords in, (features, labels) out.

Per example: decode → (tf.SequenceExamples: one frame in training, every
frame in evaluation, see sequence_frames) → (train only) augment →
model.preprocess (resize and normalize) → classes one-hot without
background → pad every tensor to a static shape (`max_number_of_boxes`
boxes, with `num_groundtruth_boxes`; Context R-CNN's context features to
`max_num_context_features`, with `valid_context_size`) → batch. Features
and labels use the original's keys, so model_fn code and TPU shapes are the
same as with the original.
"""
import functools

import tensorflow as tf
from tensorflow_estimator.python.estimator.export import export as export_lib

from od_estimator.input_pipeline import context_features
from od_estimator.input_pipeline import input_groundtruth as groundtruth
from od_estimator.builders import dataset_builder
from od_estimator.builders import image_resizer_builder
from od_estimator.builders import model_builder
from od_estimator.builders import preprocessor_builder
from od_estimator.core import box_list
from od_estimator.core import box_list_ops
from od_estimator.core import preprocessor
from od_estimator.core import standard_fields as fields
from od_estimator.data_decoders import tf_example_decoder
# Re-exported for validate and callers. pylint: disable=unused-import
from od_estimator.input_pipeline.input_groundtruth import (
    merge_boxes_with_multiple_labels, PER_BOX_FIELDS)
from od_estimator.input_pipeline.input_checks import check_input_options
from od_estimator.input_pipeline.input_checks import predicts_instance_masks
from od_estimator.input_pipeline.sequence_frames import get_reduce_to_frame_fn
from od_estimator.input_pipeline.static_shapes import (
    pad_input_data_to_static_shapes)
# pylint: enable=unused-import
from od_estimator.protos import eval_pb2
from od_estimator.protos import image_resizer_pb2
from od_estimator.protos import input_reader_pb2
from od_estimator.protos import model_pb2
from od_estimator.protos import train_pb2
from od_estimator.config import config_util

HASH_KEY = 'hash'
HASH_BINS = 1 << 31
SERVING_FED_EXAMPLE_KEY = 'serialized_example'
_IN = fields.InputDataFields

_REQUIRED_LABELS = (_IN.num_groundtruth_boxes, _IN.groundtruth_boxes,
                    _IN.groundtruth_classes, _IN.groundtruth_weights)
_OPTIONAL_LABELS = (
    _IN.groundtruth_confidences, _IN.groundtruth_labeled_classes,
    _IN.groundtruth_keypoints, _IN.groundtruth_instance_masks,
    _IN.groundtruth_area, _IN.groundtruth_is_crowd, _IN.groundtruth_group_of,
    _IN.groundtruth_difficult, _IN.groundtruth_keypoint_visibilities,
    _IN.groundtruth_keypoint_weights, _IN.groundtruth_image_classes)


def transform_input_data(tensor_dict, model_preprocess_fn, image_resizer_fn,
                         num_classes, data_augmentation_fn=None,
                         merge_multiple_boxes=False,
                         retain_original_image=False,
                         use_multiclass_scores=False, use_bfloat16=False,
                         retain_original_image_additional_channels=False,
                         image_classes_field_map_empty_to_ones=True):
  """Turns one decoded example into model-ready tensors.

  In order: multiclass scores to [N, num_classes]; refuse per-object lists
  of another length than the boxes, masks not one per box of the image's
  size, and class ids out of 1..num_classes;
  drop boxes with NaN coordinates or unknown classes, refuse inverted ones; k-hot labeled/image
  classes; keep the resized original image if asked; merge additional
  channels into the image; augment; model preprocess; express boxes in the
  preprocessed image's frame (padding excluded); one-hot classes without
  background; merge identical boxes if asked.

  Args:
    tensor_dict: decoder output, keyed by InputDataFields. Only the image is
      required: without groundtruth_boxes (prediction-only data) there is no
      num_groundtruth_boxes, without groundtruth_classes no class targets.
    model_preprocess_fn: DetectionModel.preprocess.
    image_resizer_fn: from image_resizer_builder (also resizes masks).
    num_classes: classes without background.
    data_augmentation_fn: optional fn(tensor_dict) -> tensor_dict.
    merge_multiple_boxes: merge identical boxes into k-hot targets.
    retain_original_image: keep the resized uint8 image as original_image.
    use_multiclass_scores: use multiclass_scores as class targets (the
      one-hot classes for an example whose scores are empty).
    use_bfloat16: cast the image to bfloat16 (TPU).
    retain_original_image_additional_channels: keep them resized.
    image_classes_field_map_empty_to_ones: empty image-level classes mean
      "every class was labeled".

  Returns:
    A new dict keyed by InputDataFields.

  Raises:
    tf.errors.InvalidArgumentError: at run time, for a box with ymax < ymin
      or xmax < xmin, a class id of 0 or above num_classes, per-object
      lists of different lengths (see input_groundtruth.refuse_bad_objects)
      or masks that do not fit (input_groundtruth.refuse_misfit_masks).
  """
  out = _checked_groundtruth(dict(tensor_dict), num_classes,
                             image_classes_field_map_empty_to_ones)
  out = _with_originals_and_channels(
      out, image_resizer_fn, retain_original_image,
      retain_original_image_additional_channels)
  if data_augmentation_fn is not None:
    out = data_augmentation_fn(out)
  out = _preprocessed(out, model_preprocess_fn, image_resizer_fn,
                      use_bfloat16)
  if _IN.groundtruth_classes not in out:
    return out
  return _with_class_targets(out, num_classes, use_multiclass_scores,
                             merge_multiple_boxes)


def _checked_groundtruth(out, num_classes,
                         image_classes_field_map_empty_to_ones):
  """transform_input_data's first steps, up to the k-hot image classes."""
  if _IN.multiclass_scores in out and _IN.groundtruth_classes in out:
    # Per-box [N, num_classes] before boxes are dropped or augmented.
    out[_IN.multiclass_scores] = groundtruth.multiclass_scores_or_one_hot(
        out[_IN.multiclass_scores], out[_IN.groundtruth_classes], num_classes)
  if _IN.groundtruth_boxes in out:
    if _IN.groundtruth_weights not in out:
      out[_IN.groundtruth_weights] = tf.ones_like(
          out[_IN.groundtruth_boxes][:, 0])
    out = groundtruth.fill_missing_per_box_fields(out)
    if _IN.groundtruth_instance_masks in out:
      out = groundtruth.refuse_misfit_masks(out)
    if _IN.groundtruth_classes in out:
      out = groundtruth.refuse_bad_objects(out, num_classes)
    out = groundtruth.refuse_inverted_boxes(
        groundtruth.drop_invalid_groundtruth(out))
  for field, empty_means_all in (
      (_IN.groundtruth_labeled_classes, True),
      (_IN.groundtruth_image_classes, image_classes_field_map_empty_to_ones),
      (_IN.groundtruth_verified_neg_classes, False),
      (_IN.groundtruth_not_exhaustive_classes, False)):
    if field in out:
      out[field] = groundtruth.k_hot(out[field], num_classes,
                                     empty_means_all)
  return out


def _with_originals_and_channels(out, image_resizer_fn, retain_original_image,
                                 retain_original_image_additional_channels):
  """Keeps the resized originals asked for; appends additional channels."""
  if retain_original_image:
    out[_IN.original_image] = tf.cast(
        image_resizer_fn(out[_IN.image], None)[0], tf.uint8)
  if _IN.image_additional_channels in out:
    channels = out[_IN.image_additional_channels]
    out[_IN.image] = tf.concat([out[_IN.image], channels], axis=2)
    if retain_original_image_additional_channels:
      out[_IN.image_additional_channels] = tf.cast(
          image_resizer_fn(channels, None)[0], tf.uint8)
  return out


def _preprocessed(out, model_preprocess_fn, image_resizer_fn, use_bfloat16):
  """Runs the model's preprocessing; boxes, keypoints and masks follow."""
  image = out[_IN.image]
  preprocessed, true_image_shape = model_preprocess_fn(
      tf.expand_dims(tf.cast(image, tf.float32), 0))
  shape = tf.shape(preprocessed)
  # The model may pad the resized image; boxes are normalized to the padded
  # tensor, so rescale them from the true (unpadded) extent.
  image_box = tf.stack([
      0.0, 0.0,
      tf.cast(shape[1], tf.float32) / tf.cast(true_image_shape[0, 0],
                                              tf.float32),
      tf.cast(shape[2], tf.float32) / tf.cast(true_image_shape[0, 1],
                                              tf.float32)])
  if _IN.groundtruth_boxes in out:
    out[_IN.groundtruth_boxes] = box_list_ops.change_coordinate_frame(
        box_list.BoxList(out[_IN.groundtruth_boxes]), image_box).get()
  if _IN.groundtruth_keypoints in out:
    keypoints = out[_IN.groundtruth_keypoints]
    out[_IN.groundtruth_keypoints] = keypoints / tf.reshape(image_box[2:],
                                                            [1, 1, 2])
    if _IN.groundtruth_keypoint_visibilities not in out:
      out[_IN.groundtruth_keypoint_visibilities] = tf.ones_like(
          keypoints[:, :, 0], tf.bool)
    out[_IN.groundtruth_keypoint_weights] = tf.cast(
        out[_IN.groundtruth_keypoint_visibilities], tf.float32)
  if use_bfloat16:
    preprocessed = tf.cast(preprocessed, tf.bfloat16)
    if _IN.context_features in out:
      out[_IN.context_features] = tf.cast(out[_IN.context_features],
                                          tf.bfloat16)
  out[_IN.image] = tf.squeeze(preprocessed, 0)
  out[_IN.true_image_shape] = tf.squeeze(true_image_shape, 0)
  if _IN.groundtruth_instance_masks in out:
    _, masks, _ = image_resizer_fn(image, out[_IN.groundtruth_instance_masks])
    out[_IN.groundtruth_instance_masks] = masks
  return out


def _with_class_targets(out, num_classes, use_multiclass_scores,
                        merge_multiple_boxes):
  """One-hot (or multiclass-score) class targets, confidences, merging."""
  zero_based = out[_IN.groundtruth_classes] - fields.LABEL_ID_OFFSET
  if use_multiclass_scores and _IN.multiclass_scores in out:
    out[_IN.groundtruth_classes] = out[_IN.multiclass_scores]
  else:
    out[_IN.groundtruth_classes] = tf.one_hot(zero_based, num_classes)
  out.pop(_IN.multiclass_scores, None)
  if _IN.groundtruth_confidences in out:
    confidences = out[_IN.groundtruth_confidences]
    out[_IN.groundtruth_confidences] = (
        tf.reshape(confidences, [-1, 1]) * out[_IN.groundtruth_classes])
  else:
    confidences = tf.ones_like(zero_based, tf.float32)
    out[_IN.groundtruth_confidences] = out[_IN.groundtruth_classes]
  if merge_multiple_boxes:
    boxes, classes, merged_confidences, first = (
        groundtruth.merge_boxes_with_multiple_labels(
            out[_IN.groundtruth_boxes], zero_based, confidences, num_classes))
    out = groundtruth.keep_boxes(out, first)
    out[_IN.groundtruth_boxes] = boxes
    out[_IN.groundtruth_classes] = classes
    out[_IN.groundtruth_confidences] = merged_confidences
  if _IN.groundtruth_boxes in out:
    out[_IN.num_groundtruth_boxes] = tf.shape(out[_IN.groundtruth_boxes])[0]
  return out


def _func_arg_map(tensor_dict):
  present = lambda field: field in tensor_dict
  return preprocessor.get_default_func_arg_map(
      include_label_weights=present(_IN.groundtruth_weights),
      include_label_confidences=present(_IN.groundtruth_confidences),
      include_multiclass_scores=present(_IN.multiclass_scores),
      include_instance_masks=present(_IN.groundtruth_instance_masks),
      include_keypoints=present(_IN.groundtruth_keypoints),
      include_keypoint_visibilities=present(
          _IN.groundtruth_keypoint_visibilities))


def augment_input_data(tensor_dict, data_augmentation_options):
  """Applies (function, kwargs) augmentation steps to one example."""
  tensor_dict = dict(tensor_dict)
  tensor_dict[_IN.image] = tf.expand_dims(
      tf.cast(tensor_dict[_IN.image], tf.float32), 0)
  tensor_dict = preprocessor.preprocess(
      tensor_dict, data_augmentation_options,
      func_arg_map=_func_arg_map(tensor_dict))
  tensor_dict[_IN.image] = tf.squeeze(tensor_dict[_IN.image], 0)
  return tensor_dict


def _labels_dict(tensor_dict):
  labels = {key: tensor_dict[key] for key in _REQUIRED_LABELS}
  labels.update({key: tensor_dict[key] for key in _OPTIONAL_LABELS
                 if key in tensor_dict})
  if _IN.groundtruth_difficult in labels:
    labels[_IN.groundtruth_difficult] = tf.cast(
        labels[_IN.groundtruth_difficult], tf.int32)
  return labels


def _features_dict(tensor_dict, include_source_id=False):
  """Image tensors, plus a hash of the source id (random when it is empty)."""
  source_id = tensor_dict[_IN.source_id]
  source_id = tf.cond(
      tf.equal(source_id, ''),
      lambda: tf.strings.as_string(tf.random.uniform(
          [], maxval=2**62, dtype=tf.int64)),
      lambda: source_id)
  features = {
      _IN.image: tensor_dict[_IN.image],
      HASH_KEY: tf.cast(tf.strings.to_hash_bucket_fast(source_id, HASH_BINS),
                        tf.int32),
      _IN.true_image_shape: tensor_dict[_IN.true_image_shape],
      _IN.original_image_spatial_shape:
          tensor_dict[_IN.original_image_spatial_shape],
  }
  if include_source_id:
    features[_IN.source_id] = source_id
  for field in (_IN.original_image, _IN.image_additional_channels,
                _IN.context_features, _IN.valid_context_size):
    if field in tensor_dict:
      features[field] = tensor_dict[field]
  return features


def _check_types(**configs):
  expected = {'train_config': train_pb2.TrainConfig,
              'eval_config': eval_pb2.EvalConfig,
              'input_config': input_reader_pb2.InputReader,
              'model_config': model_pb2.DetectionModel}
  for name, value in configs.items():
    if not isinstance(value, expected[name]):
      raise TypeError('%s must be a %s, got %s' % (
          name, expected[name].__name__, type(value).__name__))


def _transform_and_pad_fn(model_config, input_config, model_preprocess_fn,
                          image_resizer_config, include_source_id, **kwargs):
  """Returns fn(tensor_dict) -> (features, labels) for one example."""
  num_classes = config_util.get_number_of_classes(model_config)
  image_resizer_fn = image_resizer_builder.build(image_resizer_config)

  def transform_and_pad(tensor_dict):
    transformed = transform_input_data(
        tensor_dict, model_preprocess_fn=model_preprocess_fn,
        image_resizer_fn=image_resizer_fn, num_classes=num_classes, **kwargs)
    if _IN.groundtruth_instance_masks in transformed:
      # 0/1 masks travel tf.data's buffers as uint8 (see _float_masks).
      transformed[_IN.groundtruth_instance_masks] = tf.cast(
          transformed[_IN.groundtruth_instance_masks], tf.uint8)
    padded = pad_input_data_to_static_shapes(
        transformed, max_num_boxes=input_config.max_number_of_boxes,
        num_classes=num_classes,
        spatial_image_shape=config_util.get_spatial_image_size(
            image_resizer_config),
        max_num_context_features=config_util.get_max_num_context_features(
            model_config),
        context_feature_length=config_util.get_context_feature_length(
            model_config))
    return (_features_dict(padded, include_source_id), _labels_dict(padded))
  return transform_and_pad


def _float_masks(dataset):
  """Casts the labels' uint8 instance masks to float32 as they leave.

  Padded to max_number_of_boxes at the image size, masks dominate the
  memory of the parallel maps' and the prefetch buffers (100 x 800 x 1365
  float32 is 437 MB an image); kept uint8 there, they take a quarter.
  """
  if _IN.groundtruth_instance_masks not in dataset.element_spec[1]:
    return dataset

  def to_float(features, labels):
    labels = dict(labels)
    labels[_IN.groundtruth_instance_masks] = tf.cast(
        labels[_IN.groundtruth_instance_masks], tf.float32)
    return features, labels

  return dataset.map(to_float)


def train_input(train_config, train_input_config, model_config, model=None,
                params=None, input_context=None):
  """Returns the training tf.data.Dataset of (features, labels) batches.

  Args:
    train_config: train_pb2.TrainConfig (batch size, augmentation, ...).
    train_input_config: input_reader_pb2.InputReader.
    model_config: model_pb2.DetectionModel.
    model: a DetectionModel whose preprocess to use; built when None.
    params: Estimator params; params['batch_size'] (set per shard by
      TPUEstimator) overrides train_config.batch_size.
    input_context: tf.distribute.InputContext for per-worker sharding.

  Returns:
    A dataset whose every tensor has a fully defined shape when the image
    resizer fixes the image size. With load_context_features the features
    hold context_features [batch, max_num_context_features,
    context_feature_length] float32 and valid_context_size [batch] int32.
    TF_SEQUENCE_EXAMPLE input gives one frame of each sequence
    (frame_index, random when -1), as the original.
  """
  _check_types(train_config=train_config, input_config=train_input_config,
               model_config=model_config)
  check_input_options(train_input_config, 'train_input_reader', train_config,
                      model_config=model_config)
  model = model or model_builder.build(model_config, is_training=True)
  augmentation = [preprocessor_builder.build(step)
                  for step in train_config.data_augmentation_options]
  transform_and_pad = _transform_and_pad_fn(
      model_config, train_input_config, model.preprocess,
      config_util.get_image_resizer_config(model_config),
      train_input_config.include_source_id,
      data_augmentation_fn=functools.partial(
          augment_input_data, data_augmentation_options=augmentation),
      merge_multiple_boxes=train_config.merge_multiple_label_boxes,
      retain_original_image=train_config.retain_original_images,
      use_multiclass_scores=train_config.use_multiclass_scores,
      use_bfloat16=train_config.use_bfloat16)
  batch_size = (params or {}).get('batch_size', train_config.batch_size)
  return _float_masks(dataset_builder.build(
      train_input_config, batch_size=batch_size,
      transform_input_data_fn=transform_and_pad, input_context=input_context,
      reduce_to_frame_fn=get_reduce_to_frame_fn(train_input_config, True)))


def eval_input(eval_config, eval_input_config, model_config, model=None,
               params=None, input_context=None):
  """Returns the evaluation dataset (no augmentation); see train_input.

  TF_SEQUENCE_EXAMPLE input gives every frame of each sequence, in order.
  """
  _check_types(eval_config=eval_config, input_config=eval_input_config,
               model_config=model_config)
  check_input_options(eval_input_config, 'eval_input_reader',
                      model_config=model_config,
                      metrics_sets=eval_config.metrics_set)
  resizer_config = config_util.get_image_resizer_config(model_config)
  if eval_config.force_no_resize:
    resizer_config = image_resizer_pb2.ImageResizer(
        identity_resizer=image_resizer_pb2.IdentityResizer())
  model = model or model_builder.build(model_config, is_training=False)
  transform_and_pad = _transform_and_pad_fn(
      model_config, eval_input_config, model.preprocess, resizer_config,
      eval_input_config.include_source_id,
      retain_original_image=eval_config.retain_original_images,
      retain_original_image_additional_channels=(
          eval_config.retain_original_image_additional_channels),
      image_classes_field_map_empty_to_ones=(
          eval_config.image_classes_field_map_empty_to_ones))
  batch_size = (params or {}).get('batch_size', eval_config.batch_size)
  return _float_masks(dataset_builder.build(
      eval_input_config, batch_size=batch_size,
      transform_input_data_fn=transform_and_pad, input_context=input_context,
      reduce_to_frame_fn=get_reduce_to_frame_fn(eval_input_config, False)))


def worker_input_context(run_config):
  """The InputContext of one training task of a TF_CONFIG cluster, or None.

  In between-graph replication (chief and workers, each running its own
  graph) task i of the n training tasks reads every n-th input file, with
  the full train_config.batch_size: the Estimator gives such tasks no
  InputContext of its own. None outside a cluster, on parameter servers,
  the evaluator, and under TPUEstimator (which feeds its hosts itself).

  Args:
    run_config: the Estimator's tf.estimator.RunConfig, or None.
  """
  if run_config is None or getattr(run_config, 'tpu_config', None):
    return None
  if (run_config.num_worker_replicas <= 1 or
      run_config.task_type not in ('chief', 'master', 'worker')):
    return None
  return tf.distribute.InputContext(
      num_input_pipelines=run_config.num_worker_replicas,
      input_pipeline_id=run_config.global_id_in_cluster,
      num_replicas_in_sync=1)


def create_train_input_fn(train_config, train_input_config, model_config):
  """Returns input_fn(params, config, input_context) for TRAIN mode.

  The Estimator passes `input_context` under a distribution strategy
  (batch_size is then split across its replicas) and `config` always; a
  TF_CONFIG cluster's training tasks each read their share of the files
  (see worker_input_context).
  """
  def _train_input_fn(params=None, config=None, input_context=None):
    return train_input(
        train_config, train_input_config, model_config, params=params,
        input_context=input_context or worker_input_context(config))
  return _train_input_fn


def create_eval_input_fn(eval_config, eval_input_config, model_config):
  """Returns input_fn(params) for Estimator EVAL mode."""
  def _eval_input_fn(params=None):
    return eval_input(eval_config, eval_input_config, model_config,
                      params=params)
  return _eval_input_fn


def _preprocess_single_image(image, model_config):
  """[H, W, 3] uint8 image → ([1, h, w, 3] float32, [1, 3] true shape)."""
  model = model_builder.build(model_config, is_training=False)
  return model.preprocess(tf.expand_dims(tf.cast(image, tf.float32), 0))


def create_predict_input_fn(model_config, predict_input_config):
  """Returns input_fn(params) → ServingInputReceiver fed serialized Examples.

  The receiver tensor is `serialized_example` (a scalar string), as in the
  original's Estimator exports. The image feature carries the
  predict_input_config.num_additional_channels after its 3 channels. A
  Context R-CNN also receives its side inputs as features and receiver
  tensors named as export_inference_graph's: context_features [1,
  max_num_context_features, context_feature_length] float32 (zero rows
  past the valid ones) and valid_context_size [1] int32
  (context_features.side_input_specs).
  """
  def _predict_input_fn(params=None):
    del params
    example = tf.compat.v1.placeholder(tf.string, shape=[], name='tf_example')
    decoder = tf_example_decoder.TfExampleDecoder(
        load_instance_masks=False,
        num_additional_channels=predict_input_config.num_additional_channels)
    decoded = decoder.decode(example)
    image = decoded[_IN.image]
    if _IN.image_additional_channels in decoded:
      # The model sees 3 + num_additional_channels channels, as in training.
      image = tf.concat([image, decoded[_IN.image_additional_channels]],
                        axis=2)
    images, true_image_shape = _preprocess_single_image(image, model_config)
    side_inputs = {
        name: tf.compat.v1.placeholder(dtype, shape=shape, name=name)
        for name, shape, dtype in context_features.side_input_specs(
            model_config)}
    return export_lib.ServingInputReceiver(
        features=dict(side_inputs, **{_IN.image: images,
                                      _IN.true_image_shape: true_image_shape}),
        receiver_tensors=dict(side_inputs,
                              **{SERVING_FED_EXAMPLE_KEY: example}))
  return _predict_input_fn
