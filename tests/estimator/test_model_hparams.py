"""model_hparams.create_hparams as the original's model_main calls it."""
import pytest

from od_estimator import errors
from od_estimator.estimator import model_hparams
from od_estimator.estimator import model_fn
from od_estimator.config import config_util


def test_default_loads_the_pretrained_checkpoint():
  hparams = model_hparams.create_hparams()
  assert hparams.load_pretrained is True
  assert hparams.values() == {'load_pretrained': True}
  assert model_hparams.create_hparams('').load_pretrained is True


def test_overrides_are_parsed():
  hparams = model_hparams.create_hparams(
      'load_pretrained=false,train_config.batch_size=4')
  assert hparams.load_pretrained is False
  assert hparams.values()['train_config.batch_size'] == 4
  assert model_fn.load_pretrained(hparams) is False


def test_boolean_hparam_rejects_other_values():
  with pytest.raises(errors.UserInputError, match='load_pretrained'):
    model_hparams.create_hparams('load_pretrained=maybe')
  with pytest.raises(errors.UserInputError, match='key=value'):
    model_hparams.create_hparams('load_pretrained')


def test_hparams_methods():
  hparams = model_hparams.create_hparams()
  hparams.add_hparam('num_steps', 3)
  with pytest.raises(ValueError):
    hparams.add_hparam('num_steps', 4)
  hparams.num_steps = 5
  assert hparams.get('num_steps') == 5 and 'num_steps' in hparams
  assert hparams.parse('num_steps=7') is hparams and hparams.num_steps == 7
  with pytest.raises(AttributeError):
    hparams.missing  # pylint: disable=pointless-statement


def test_merge_with_configs_applies_the_overrides():
  configs = config_util.create_configs_from_pipeline_proto(
      config_util.parse_pipeline_text(
          'train_config { batch_size: 2 } model { ssd { num_classes: 3 } }'))
  merged = config_util.merge_external_params_with_configs(
      configs, model_hparams.create_hparams('train_config.batch_size=8'))
  assert merged is configs
  assert configs['train_config'].batch_size == 8
