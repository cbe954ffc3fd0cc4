"""The Estimator glue: model_fn (train, eval, predict), Estimator and
TPUEstimator factory, fine-tuning, resume check, preemption and progress
hooks, XLA."""
