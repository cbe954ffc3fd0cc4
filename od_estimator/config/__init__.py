"""The pipeline config: reading and writing the text proto, overrides and
the dict of configs every command works from."""
