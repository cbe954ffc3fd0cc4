"""Tests for od_estimator.config.config_overrides (merging is tested with
config_util.merge_external_params_with_configs)."""
from google.protobuf import text_format
import pytest

from od_estimator import errors
from od_estimator.protos import input_reader_pb2
from od_estimator.protos import model_pb2
from od_estimator.config import config_overrides


def test_parse_hparams_overrides_types_quotes_and_lists():
  assert config_overrides.parse_hparams_overrides(
      ' a=1, b=0.5,c=true,d=False,e=x.record,f="1,2",g=[1, "b,c"],h=[]') == {
          'a': 1, 'b': 0.5, 'c': True, 'd': False, 'e': 'x.record',
          'f': '1,2', 'g': [1, 'b,c'], 'h': []}
  assert config_overrides.parse_hparams_overrides('') == {}
  for bad, words in (('a', 'key=value'), ('a="1', 'unbalanced quotes'),
                     ('a=[1', 'unbalanced brackets')):
    with pytest.raises(ValueError, match=words):
      config_overrides.parse_hparams_overrides(bad)


def test_set_field_converts_to_the_field_type():
  reader = input_reader_pb2.InputReader()
  config_overrides.set_field(reader, 'num_readers', 3, 'k')
  config_overrides.set_field(reader, 'shuffle', 0, 'k')
  config_overrides.set_field(reader, 'input_type', 'TF_SEQUENCE_EXAMPLE', 'k')
  assert (reader.num_readers, reader.shuffle, reader.input_type) == (
      3, False, input_reader_pb2.InputType.Value('TF_SEQUENCE_EXAMPLE'))
  with pytest.raises(ValueError, match='has no field .num_reader.'):
    config_overrides.set_field(reader, 'num_reader', 3, 'k')
  with pytest.raises(ValueError, match='accepts'):
    config_overrides.set_field(reader, 'input_type', 'CSV', 'k')
  with pytest.raises(errors.UserInputError, match='does not fit'):
    config_overrides.set_field(reader, 'num_readers', 'many', 'k')


def test_set_path_walks_messages_and_indices():
  model = text_format.Parse(
      'ssd { num_classes: 3 anchor_generator { ssd_anchor_generator { '
      'aspect_ratios: 1.0 aspect_ratios: 2.0 } } }', model_pb2.DetectionModel())
  configs = {'model': model, 'eval_input_configs': [
      input_reader_pb2.InputReader(), input_reader_pb2.InputReader()]}
  config_overrides.set_path(configs, 'model.ssd.num_classes', 7)
  config_overrides.set_path(
      configs, 'model.ssd.anchor_generator.ssd_anchor_generator'
      '.aspect_ratios[-1]', 3)
  config_overrides.set_path(configs, 'eval_input_configs[1].shuffle', False)
  assert model.ssd.num_classes == 7
  assert list(model.ssd.anchor_generator.ssd_anchor_generator
              .aspect_ratios) == [1.0, 3.0]
  assert [c.shuffle for c in configs['eval_input_configs']] == [True, False]
  # A oneof member other than the one set is a typo, not a switch.
  with pytest.raises(ValueError, match='oneof `model` holds `ssd`'):
    config_overrides.set_path(configs, 'model.faster_rcnn.num_classes', 2)
  with pytest.raises(ValueError, match='index 2 is out of range'):
    config_overrides.set_path(configs, 'eval_input_configs[2].shuffle', True)
