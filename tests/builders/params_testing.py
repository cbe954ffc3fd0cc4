"""Comparing a part's frozen params dataclass with what a config asks for."""
import dataclasses


def settings(params):
  """params with every field that holds an object (a component, a function)
  set to None, so the rest compares with ==."""
  return dataclasses.replace(params, **{
      field.name: None for field in dataclasses.fields(params)
      if not isinstance(getattr(params, field.name), (bool, int, float))})
