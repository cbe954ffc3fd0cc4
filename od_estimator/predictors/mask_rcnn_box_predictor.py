"""Second-stage box predictor of Faster R-CNN and Mask R-CNN (tf-slim).

Mask R-CNN: He, Gkioxari, Dollar and Girshick, https://arxiv.org/abs/
1703.06870. The cropped features of every proposal of every image come
stacked along the first axis; each proposal gets a box per class (or one
shared box) and class logits with background. Heads predicting more from the
same features (masks, keypoints) form a third stage, run separately: Mask
R-CNN predicts masks on the detected boxes, after the second stage.

Variable names follow the original's checkpoints; the Faster R-CNN model
calls predict with scope 'SecondStageBoxPredictor' and the heads name their
layers, giving e.g. SecondStageBoxPredictor/BoxEncodingPredictor/weights
[channels, num_classes * 4] and SecondStageBoxPredictor/ClassPredictor/
weights [channels, num_classes + 1]; a `renaming` gives them other names
(the original's Keras ones, two_stage_keras_names.second_stage_name).
"""
import contextlib

from od_estimator.core import box_predictor
from od_estimator.utils import keras_names

BOX_ENCODINGS = box_predictor.BOX_ENCODINGS
CLASS_PREDICTIONS_WITH_BACKGROUND = (
    box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND)
MASK_PREDICTIONS = box_predictor.MASK_PREDICTIONS


class MaskRCNNBoxPredictor(box_predictor.BoxPredictor):
  """Box, class and third-stage heads over ROI features.

  predict(image_features=[rois], num_predictions_per_location=[1],
  scope=..., prediction_stage=2 or 3), rois being [num_rois, height, width,
  channels] with num_rois = batch * proposals per image.
  """

  def __init__(self,
               is_training,
               num_classes,
               box_prediction_head,
               class_prediction_head,
               third_stage_heads,
               renaming=None):
    """Constructor.

    Args:
      is_training: whether the predictor is built for training.
      num_classes: number of classes, background excluded.
      box_prediction_head: head with predict(features,
        num_predictions_per_location) -> [num_rois, 1, q, code_size], e.g.
        box_head.MaskRCNNBoxHead.
      class_prediction_head: head with predict(features,
        num_predictions_per_location) -> [num_rois, 1, num_class_slots],
        e.g. class_head.MaskRCNNClassHead.
      third_stage_heads: dict from output name (e.g. MASK_PREDICTIONS) to a
        head with the same predict method; may be empty.
      renaming: optional callable(slim variable name relative to the
        predictor's scope) -> the variable's name from the graph's root.
    """
    super().__init__(is_training, num_classes)
    self._box_prediction_head = box_prediction_head
    self._class_prediction_head = class_prediction_head
    self._third_stage_heads = dict(third_stage_heads)
    self._renaming = renaming

  def get_second_stage_prediction_heads(self):
    """Output names of the second stage."""
    return BOX_ENCODINGS, CLASS_PREDICTIONS_WITH_BACKGROUND

  def get_third_stage_prediction_heads(self):
    """Output names of the third stage, sorted (empty without such heads)."""
    return sorted(self._third_stage_heads)

  def third_stage_head(self, name):
    """The third-stage head giving output `name` (e.g. MASK_PREDICTIONS)."""
    return self._third_stage_heads[name]

  def _predict(self, image_features, num_predictions_per_location,
               prediction_stage=2):
    """Runs the heads of one stage.

    Args:
      image_features: list of one [num_rois, height, width, channels] float
        tensor.
      num_predictions_per_location: [1].
      prediction_stage: 2 for boxes and classes, 3 for the third-stage heads.

    Returns:
      Stage 2: {BOX_ENCODINGS: [num_rois, 1, q, code_size] with q =
      num_classes, or 1 when boxes are shared across classes;
      CLASS_PREDICTIONS_WITH_BACKGROUND: [num_rois, 1, num_classes + 1]}.
      Stage 3: {name: that head's output} for each third-stage head.

    Raises:
      ValueError: for more than one feature map, a number of predictions per
        location other than 1, or a stage other than 2 and 3.
    """
    if len(image_features) != 1:
      raise ValueError('MaskRCNNBoxPredictor takes one feature tensor (the '
                       'stacked ROI crops), got %d' % len(image_features))
    if list(num_predictions_per_location) != [1]:
      raise ValueError('MaskRCNNBoxPredictor predicts once per ROI: '
                       'num_predictions_per_location must be [1], got %s'
                       % list(num_predictions_per_location))
    if prediction_stage == 2:
      heads = {BOX_ENCODINGS: self._box_prediction_head,
               CLASS_PREDICTIONS_WITH_BACKGROUND: self._class_prediction_head}
      names = self.get_second_stage_prediction_heads()
    elif prediction_stage == 3:
      heads = self._third_stage_heads
      names = self.get_third_stage_prediction_heads()
    else:
      raise ValueError('prediction_stage must be 2 or 3, got %r'
                       % (prediction_stage,))
    naming = (keras_names.renamed_variables(self._renaming, root_scope='')
              if self._renaming else contextlib.nullcontext())
    with naming:
      return {name: heads[name].predict(features=image_features[0],
                                        num_predictions_per_location=1)
              for name in names}
