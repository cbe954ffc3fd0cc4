"""Module attributes kept in sibling modules and imported on first use.

A module keeps the original's public names while their code lives in
smaller siblings that import it back:
  __getattr__ = lazy_names.from_siblings(__name__, {'Name': 'sibling'})
"""
import importlib


def from_siblings(module_name, names):
  """A PEP 562 module __getattr__ finding `names` in sibling modules.

  Args:
    module_name: the module's __name__ ('od_estimator.utils.x').
    names: {attribute: sibling module name in the same package}.
  """
  package = module_name.rsplit('.', 1)[0]

  def getattr_(name):
    if name not in names:
      raise AttributeError('module %r has no attribute %r' % (module_name,
                                                             name))
    return getattr(importlib.import_module(package + '.' + names[name]), name)
  return getattr_
