"""Decoders from serialized records to tensor dicts."""
