"""The original's oldest commands, train.py and eval.py, on the Estimator.

`python -m od_estimator.legacy.train` and `python -m od_estimator.legacy.eval`
take the original legacy commands' flags and honour the config fields those
commands read; they build the same model_fn and input functions as
model_main.
"""
