"""Checks run before a launch: the config (`od-estimator validate`), the TPU
step, the launch-time check, config notes, the record scanner."""
