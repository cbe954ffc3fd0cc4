"""Every sample config with a graph_rewriter builds its quantized graph.

For each of the original's configs carrying `graph_rewriter { quantization
}` (MobileNet v1/v2, FPN-lite, MobileNet EdgeTPU, ...): the model predicts
at a reduced input size, then the config's evaluation / export rewrite
runs as model_lib runs it, on the inference graph tests/upstream_ssd.py
builds for the config anyway (test_quantized_config_builds_its_rewritten_graph
in tests/test_upstream_ssd_inference_configs.py). Every convolution that
the predictions depend on then reads fake-quantized weights and its output
is fake-quantized. The training rewrite (range updates, quant_delay
switch; ~10x the ops, so ~10x the build time) is checked the same way on
the tiny SSD MobileNet v2 (residual blocks, depthwise box predictor) in
tests/builders/test_graph_rewriter_builder.py.
"""
from tests import upstream_folder
from tests import upstream_ssd

QUANTIZED_CONFIGS = [path for path in upstream_folder.paths()
                     if upstream_ssd.graph_rewriter(path) is not None]


def test_the_folder_has_the_quantized_sample_configs(upstream_configs):
  assert len(QUANTIZED_CONFIGS) >= 9, upstream_configs
  # So upstream_ssd builds each as an inference graph and checks its rewrite.
  for path in QUANTIZED_CONFIGS:
    assert upstream_ssd.is_ssd(path), path
    assert not upstream_ssd.is_training(path), path
