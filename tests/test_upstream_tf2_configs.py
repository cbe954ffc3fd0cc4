"""The original's TF2-era sample configs (../shared/upstream_configs_tf2).

Every one parses. The SSD configs whose feature extractor od_estimator
provides build as inference graphs at a reduced size (tests/upstream_ssd.py,
one build per distinct model) and predict, with the TF2 variable names (the
Keras layers' own, no `FeatureExtractor/` scope); their variables are the
training graph's, and each extractor trains in
tests/models/test_ssd_keras_training.py. The two-stage ones whose
extractor it provides build their models, for training and inference
(each extractor's graph and names: its tests/models/ module); the Faster
R-CNN ResNet (C4) ones build at 64x64 (tests/tf2_faster_rcnn.py) with
exactly the variables of the original's TF2 checkpoints: Keras names and
shapes (tests/data/tf2_checkpoint_keys/). The others are refused with one
line naming the field and the type. (EfficientDet's build in
test_upstream_efficientdet_configs, beside this module under xdist.)

The fine-tuning tests from the original's TF2 checkpoints
(tests/estimator/object_checkpoint_checks.py) run here too, on the same
graphs: one build of each model serves both.
"""
import os

import pytest
import tensorflow as tf

from od_estimator import errors
from od_estimator.builders import model_builder
from od_estimator.config import config_util
from od_estimator.meta_architectures import faster_rcnn_meta_arch
from od_estimator.models import faster_rcnn_feature_extractor_registry
from od_estimator.models import ssd_feature_extractor_registry
from tests import tf2_checkpoints
from tests import tf2_faster_rcnn
from tests import upstream_folder
from tests import upstream_ssd
from tests.estimator import object_checkpoint_checks


def _model(path):
  return config_util.get_configs_from_pipeline_file(path)['model']


_EXTRACTORS = {
    'ssd': ssd_feature_extractor_registry.SSD_FEATURE_EXTRACTORS,
    'faster_rcnn':
        faster_rcnn_feature_extractor_registry.FASTER_RCNN_FEATURE_EXTRACTORS,
}


def _builds(path, families=tuple(_EXTRACTORS)):
  """Whether od_estimator provides the config's architecture (of one of
  the families)."""
  model = _model(path)
  family = model.WhichOneof('model')
  return family in families and (
      getattr(model, family).feature_extractor.type in _EXTRACTORS[family])


def _builds_ssd(path):
  return _builds(path, ('ssd',))


def _builds_other_ssd(path):
  """SSD configs but EfficientDet (test_upstream_efficientdet_configs)."""
  return _builds_ssd(path) and not upstream_ssd.is_efficientdet(path)


def _builds_faster_rcnn(path):
  return _builds(path, ('faster_rcnn',))


def _is_faster_rcnn_resnet(path):
  """Whether the config is a Faster R-CNN ResNet (C4) we provide."""
  extractor = _model(path).faster_rcnn.feature_extractor
  return (_builds_faster_rcnn(path) and not extractor.HasField('fpn') and
          extractor.type.startswith('faster_rcnn_resnet'))


def test_the_folder_has_ssd_configs_that_build(upstream_configs_tf2):
  del upstream_configs_tf2  # the folder exists (else: skipped)
  paths = upstream_folder.paths(tf2=True)
  assert any(_builds_ssd(path) for path in paths)
  assert any(_builds_faster_rcnn(path) for path in paths)
  assert len([path for path in paths if _is_faster_rcnn_resnet(path)]) == 9


@pytest.mark.parametrize('path', upstream_folder.params(tf2=True))
def test_every_config_parses(path):
  configs = config_util.get_configs_from_pipeline_file(path)
  assert configs['model'].WhichOneof('model')
  assert configs['train_config'].batch_size > 0
  assert configs['train_input_config'].WhichOneof('input_reader')
  assert configs['eval_input_configs']


@pytest.mark.parametrize('path', upstream_folder.params(
    tf2=True, keep=_builds_other_ssd))
def test_ssd_config_builds_and_predicts_with_tf2_names(path):
  # Kept: the fine-tuning tests below restore into them.
  upstream_ssd.check_builds_and_predicts(path, training=False,
                                         keep_graph=True)
  names = upstream_ssd.built(path, training=False, keep_graph=True).shapes
  assert not [name for name in names if name.startswith('FeatureExtractor/')]


@pytest.mark.parametrize('path', upstream_folder.params(
    tf2=True, keep=_builds_faster_rcnn))
@pytest.mark.parametrize('is_training', [True, False])
def test_two_stage_config_builds_its_model(path, is_training):
  model_config = _model(path)
  with tf.Graph().as_default():
    model = model_builder.build(model_config, is_training=is_training)
  assert isinstance(model, faster_rcnn_meta_arch.FasterRCNNMetaArch)
  assert type(model.feature_extractor) is _EXTRACTORS['faster_rcnn'][
      model_config.faster_rcnn.feature_extractor.type]


@pytest.mark.parametrize('path', upstream_folder.params(
    tf2=True, keep=_is_faster_rcnn_resnet))
def test_faster_rcnn_resnet_builds_with_the_originals_variables(path):
  name = os.path.splitext(os.path.basename(path))[0]
  built = tf2_faster_rcnn.built(name)
  assert {name: variable.shape.as_list()
          for name, variable in built.variables.items()} == {
              fact.keras_name: fact.shape
              for fact in tf2_checkpoints.model_lines(tf2_checkpoints.facts(
                  tf2_faster_rcnn.facts_name(name)))}


@pytest.mark.parametrize('path', upstream_folder.params(
    tf2=True, keep=lambda path: not _builds(path)))
def test_other_configs_are_refused_by_name(path):
  model = _model(path)
  family = model.WhichOneof('model')
  with tf.Graph().as_default():
    with pytest.raises(errors.UserInputError) as raised:
      model_builder.build(model, is_training=False)
  message = str(raised.value)
  assert message.startswith('model.%s' % family), message
  assert '\n' not in message
  if family in ('ssd', 'faster_rcnn'):
    extractor = getattr(model, family).feature_extractor
    assert (repr(extractor.type) in message or
            'feature_extractor.fpn' in message), message


object_checkpoint_checks.add_tests(globals())
