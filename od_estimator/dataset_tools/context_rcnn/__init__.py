"""The original's Context R-CNN dataset tools, as Apache Beam pipelines (install extra: beam)."""
