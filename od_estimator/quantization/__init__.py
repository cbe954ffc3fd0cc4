"""Quantization-aware training graph rewrite (what tf.contrib.quantize did).

`rewrite.create_training_graph` / `rewrite.create_eval_graph` fold batch
norms into the preceding convolutions and insert FakeQuant ops with min/max
variables named as in the original's quantized checkpoints.
"""
