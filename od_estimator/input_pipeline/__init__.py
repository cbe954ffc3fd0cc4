"""The input_fns: train, eval and predict inputs, their checks and the
groundtruth they carry."""
