"""The config schema (protos/) equals the original's, field for field.

Text configs and binary protos interoperate only if every message, field
name, number, type, label, default, oneof and enum value is the same. The
schema is reduced to one line per field and enum value; its digest was taken
from the original's descriptors. With OD_ORIGINAL_PROTOS set to the
original's object_detection/protos folder, a mismatch lists the lines that
differ.
"""
import ast
import glob
import hashlib
import importlib
import os
import struct

from google.protobuf import descriptor_pb2
import pytest

from od_estimator.protos import pipeline_pb2

# Digest of _schema_lines() over the original's 34 *_pb2 modules.
_ORIGINAL_SCHEMA_SHA256 = (
    'c4bd0450bdd8fbbfa4f79113c1f7267fd6d8c78fe60135f4ae0e06cb9ecaff46')
_PROTOS_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'protos')
_FLOAT_TYPES = (descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,)


def _default(field):
  if not field.HasField('default_value'):
    return '-'
  if field.type in _FLOAT_TYPES:  # '0.8' and '0.800000012' are one float32.
    value = field.default_value
    if value.lstrip('-') in ('inf', 'nan'):
      return value
    return struct.pack('<f', float(value)).hex()
  return field.default_value


def _message_lines(prefix, message):
  lines = []
  for field in message.field:
    oneof = (message.oneof_decl[field.oneof_index].name
             if field.HasField('oneof_index') else '-')
    lines.append(' '.join(str(part) for part in (
        prefix + field.name, field.number, field.label, field.type,
        field.type_name or '-', _default(field), oneof,
        int(field.options.deprecated), int(field.options.packed))))
  for enum in message.enum_type:
    lines += _enum_lines(prefix + enum.name + '.', enum)
  for nested in message.nested_type:
    lines += _message_lines(prefix + nested.name + '.', nested)
  return lines


def _enum_lines(prefix, enum):
  return ['%s%s = %d' % (prefix, value.name, value.number)
          for value in enum.value]


def _schema_lines(file_protos):
  """One sorted line per field and enum value of the FileDescriptorProtos."""
  lines = []
  for file_proto in file_protos:
    prefix = file_proto.package + '.'
    for message in file_proto.message_type:
      lines += _message_lines(prefix + message.name + '.', message)
    for enum in file_proto.enum_type:
      lines += _enum_lines(prefix + enum.name + '.', enum)
  return sorted(lines)


def _digest(lines):
  return hashlib.sha256('\n'.join(lines).encode()).hexdigest()


def _module_names():
  return sorted(os.path.basename(p)[:-len('.proto')]
                for p in glob.glob(os.path.join(_PROTOS_DIR, '*.proto')))


def _our_file_protos():
  protos = []
  for name in _module_names():
    module = importlib.import_module('od_estimator.protos.%s_pb2' % name)
    file_proto = descriptor_pb2.FileDescriptorProto()
    file_proto.ParseFromString(module.DESCRIPTOR.serialized_pb)
    protos.append(file_proto)
  return protos


def _original_file_protos(directory):
  """FileDescriptorProtos embedded in the original's generated modules."""
  protos = []
  for path in sorted(glob.glob(os.path.join(directory, '*_pb2.py'))):
    with open(path) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if (isinstance(node, ast.Call) and
          getattr(node.func, 'attr', '') == 'AddSerializedFile'):
        file_proto = descriptor_pb2.FileDescriptorProto()
        file_proto.ParseFromString(node.args[0].value)
        protos.append(file_proto)
  return protos


def test_every_original_proto_file_is_here():
  assert len(_module_names()) == 34
  assert {p.package for p in _our_file_protos()} == {'object_detection.protos'}
  assert all(p.syntax in ('', 'proto2') for p in _our_file_protos())


def test_schema_equals_the_original():
  ours = _schema_lines(_our_file_protos())
  original_dir = os.environ.get('OD_ORIGINAL_PROTOS')
  if original_dir and os.path.isdir(original_dir):
    original = _schema_lines(_original_file_protos(original_dir))
    assert sorted(set(original) - set(ours)) == []
    assert sorted(set(ours) - set(original)) == []
  assert _digest(ours) == _ORIGINAL_SCHEMA_SHA256


@pytest.mark.parametrize('full_name, number, default', [
    ('object_detection.protos.EvalConfig.batch_size', 25, 1),
    ('object_detection.protos.TrainConfig.batch_size', 1, 32),
    ('object_detection.protos.InputReader.max_number_of_boxes', 21, 100),
    ('object_detection.protos.Ssd.num_classes', 1, 0),
    ('object_detection.protos.BatchNorm.decay', 1, pytest.approx(0.999)),
])
def test_spot_check_numbers_and_defaults(full_name, number, default):
  message_name, field_name = full_name.rsplit('.', 1)
  pool = pipeline_pb2.DESCRIPTOR.pool
  field = pool.FindMessageTypeByName(message_name).fields_by_name[field_name]
  assert (field.number, field.default_value) == (number, default)
