"""Generated config schema modules (*_pb2.py), built from protos/ at install."""
