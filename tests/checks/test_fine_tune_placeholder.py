"""A PATH_TO_BE_CONFIGURED fine_tune_checkpoint: the error names the
override that trains from scratch, and that override clears it."""
from od_estimator.checks import config_check
from od_estimator.config import config_util
from tests import tiny_ssd

_PLACEHOLDER = ('train_config { fine_tune_checkpoint: '
                '"PATH_TO_BE_CONFIGURED/model.ckpt" }')


def _checkpoint_errors(configs):
  report = config_check.Report('pipeline.config')
  config_check.check_configs(configs, report, check_eval_input_paths=False)
  return [str(error) for error in report.errors
          if error.field == 'train_config.fine_tune_checkpoint']


def test_the_placeholder_error_names_the_override_that_clears_it():
  configs = config_util.get_configs_from_pipeline_file(tiny_ssd.DEMO_CONFIG,
                                                       _PLACEHOLDER)
  [error] = _checkpoint_errors(configs)
  assert error.endswith(
      '(hint: replace PATH_TO_BE_CONFIGURED with the real path, or train '
      'from scratch: --hparams_overrides='
      'train_config.fine_tune_checkpoint="")')
  hparams = config_util.parse_hparams_overrides(
      'train_config.fine_tune_checkpoint=""')
  cleared = config_util.merge_external_params_with_configs(configs, hparams)
  assert cleared['train_config'].fine_tune_checkpoint == ''
  assert _checkpoint_errors(cleared) == []
