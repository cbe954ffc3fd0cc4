"""SSD feature extractor on MobileNet v1 (config type 'ssd_mobilenet_v1').

Variables live under `<meta-arch scope>/MobilenetV1/`: the backbone as in
the slim classification checkpoints (`MobilenetV1/Conv2d_0/weights`, ...) and
the extra SSD layers named by `multi_resolution_feature_maps`, e.g.
`FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_2_3x3_s2_512`.
"""
from od_estimator.models import ssd_feature_extractor
from od_estimator.nets import mobilenet_v1


class SSDMobileNetV1FeatureExtractor(
    ssd_feature_extractor.SSDMobileNetFeatureExtractorBase):
  """SSD maps from Conv2d_11/13_pointwise plus four stride-2 layers.

  Subclasses reuse the backbone and replace `_feature_maps`. Constructor
  arguments are those of SSDFeatureExtractor.
  """

  _SCOPE = 'MobilenetV1'
  _BACKBONE_FN = staticmethod(mobilenet_v1.mobilenet_v1_base)
  _FROM_LAYERS = ('Conv2d_11_pointwise', 'Conv2d_13_pointwise')
  # The original regularizes depthwise weights in the SSD extractors.
  _REGULARIZE_DEPTHWISE = True

  def _backbone_arg_scope(self):
    return mobilenet_v1.mobilenet_v1_arg_scope(
        is_training=None, regularize_depthwise=self._REGULARIZE_DEPTHWISE)
