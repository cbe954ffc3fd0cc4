"""Tests for od_estimator.utils.label_map_util."""
from google.protobuf import text_format
import pytest

from od_estimator.protos import string_int_label_map_pb2
from od_estimator.utils import label_map_util

_GOOD = """
item { id: 1 name: 'cat' display_name: 'Cat' }
item { id: 3 name: 'dog' }
item { id: 2 name: 'bird' display_name: 'Bird' }
"""


def _write(tmp_path, text):
  path = tmp_path / 'label_map.pbtxt'
  path.write_text(text)
  return str(path)


def _parse(text):
  return text_format.Parse(text, string_int_label_map_pb2.StringIntLabelMap())


def test_label_map_dict_by_name_and_display_name(tmp_path):
  path = _write(tmp_path, _GOOD)
  assert label_map_util.get_label_map_dict(path) == {
      'cat': 1, 'dog': 3, 'bird': 2}
  assert label_map_util.get_label_map_dict(path, use_display_name=True) == {
      'Cat': 1, 'dog': 3, 'Bird': 2}


def test_fill_in_gaps_and_background():
  label_map = _parse("item { id: 2 name: 'a' } item { id: 5 name: 'b' }")
  assert label_map_util.get_label_map_dict(
      label_map, fill_in_gaps_and_background=True) == {
          'background': 0, '1': 1, 'a': 2, '3': 3, '4': 4, 'b': 5}


def test_categories_and_index(tmp_path):
  path = _write(tmp_path, _GOOD)
  categories = label_map_util.create_categories_from_labelmap(path)
  assert categories == [{'id': 1, 'name': 'Cat'}, {'id': 3, 'name': 'dog'},
                        {'id': 2, 'name': 'Bird'}]
  index = label_map_util.create_category_index_from_labelmap(
      path, use_display_name=False)
  assert index == {1: {'id': 1, 'name': 'cat'}, 3: {'id': 3, 'name': 'dog'},
                   2: {'id': 2, 'name': 'bird'}}


def test_max_num_classes_truncates():
  categories = label_map_util.convert_label_map_to_categories(
      _parse(_GOOD), max_num_classes=2)
  assert [c['id'] for c in categories] == [1, 2]


def test_absent_label_map_names_categories_by_id():
  assert label_map_util.convert_label_map_to_categories(None, 3) == [
      {'id': 1, 'name': 'category_1'}, {'id': 2, 'name': 'category_2'},
      {'id': 3, 'name': 'category_3'}]


def test_display_name_only_item_is_named_by_it(tmp_path):
  path = _write(tmp_path, "item { id: 1 display_name: 'Person' }")
  assert label_map_util.get_label_map_dict(path) == {'Person': 1}


@pytest.mark.parametrize('text, words', [
    ("item { id: 1 name: 'a' } item { id: 1 name: 'b' }", ['id 1', 'twice']),
    ("item { id: 0 name: 'thing' }", ['id 0', 'background']),
    ("item { id: -2 name: 'thing' }", ['>= 1']),
    ('item { id: 4 }', ['id 4', 'neither name nor display_name']),
    ("item { name: 'x' }", ["'x'", 'no id']),
    ("item { id: 1 nam: 'x' }", ['not a valid label map']),
])
def test_invalid_label_maps(tmp_path, text, words):
  path = _write(tmp_path, text)
  with pytest.raises(label_map_util.LabelMapError) as raised:
    label_map_util.load_labelmap(path)
  message = str(raised.value)
  assert message.startswith(path)
  for word in words:
    assert word in message


def test_background_at_zero_is_allowed(tmp_path):
  path = _write(tmp_path, "item { id: 0 name: 'background' } "
                          "item { id: 1 name: 'a' }")
  assert label_map_util.get_label_map_dict(path) == {'background': 0, 'a': 1}


def test_binary_label_map_is_read(tmp_path):
  path = tmp_path / 'label_map.pb'
  path.write_bytes(_parse(_GOOD).SerializeToString())
  assert label_map_util.get_label_map_dict(str(path))['dog'] == 3


def test_missing_file(tmp_path):
  with pytest.raises(label_map_util.LabelMapError, match='not found'):
    label_map_util.load_labelmap(str(tmp_path / 'none.pbtxt'))


def test_class_agnostic_index():
  assert label_map_util.create_class_agnostic_category_index() == {
      1: {'id': 1, 'name': 'object'}}


def test_categories_keep_frequency_instance_count_and_keypoints():
  label_map = _parse("""
      item { id: 1 name: 'a' frequency: FREQUENT instance_count: 10 }
      item { id: 2 name: 'b' frequency: COMMON }
      item { id: 3 name: 'c' frequency: RARE
             keypoints { id: 0 label: 'head' }
             keypoints { id: 1 label: 'tail' } }
      item { id: 4 name: 'd' frequency: UNSPECIFIED }""")
  assert label_map_util.convert_label_map_to_categories(label_map, 4) == [
      {'id': 1, 'name': 'a', 'frequency': 'f', 'instance_count': 10},
      {'id': 2, 'name': 'b', 'frequency': 'c'},
      {'id': 3, 'name': 'c', 'frequency': 'r',
       'keypoints': {'head': 0, 'tail': 1}},
      {'id': 4, 'name': 'd'}]


def test_duplicate_keypoint_id_in_an_item_is_an_error():
  label_map = _parse("item { id: 1 name: 'a' keypoints { id: 0 label: 'x' } "
                     "keypoints { id: 0 label: 'y' } }")
  with pytest.raises(ValueError, match='keypoint id 0 is used twice'):
    label_map_util.convert_label_map_to_categories(label_map, 1)


def test_convert_keeps_the_first_of_duplicate_ids_and_skips_out_of_range():
  label_map = _parse("item { id: 2 name: 'a' } item { id: 2 name: 'b' } "
                     "item { id: 0 name: 'background' } "
                     "item { id: 1 display_name: 'C' name: 'c' }")
  assert label_map_util.convert_label_map_to_categories(
      label_map, 2, use_display_name=False) == [
          {'id': 2, 'name': 'a'}, {'id': 1, 'name': 'c'}]
  assert label_map_util.convert_label_map_to_categories(label_map, 0) == []


def test_keypoint_label_map_dict():
  label_map = _parse("""
      item { id: 1 name: 'person' keypoints { id: 0 label: 'nose' }
             keypoints { id: 1 label: 'eye' } }
      item { id: 2 name: 'dog' keypoints { id: 2 label: 'tail' } }""")
  assert label_map_util.get_keypoint_label_map_dict(label_map) == {
      'nose': 0, 'eye': 1, 'tail': 2}
  twice = _parse("item { id: 1 name: 'a' keypoints { id: 0 label: 'x' } } "
                 "item { id: 2 name: 'b' keypoints { id: 1 label: 'x' } }")
  with pytest.raises(ValueError, match="label 'x' is used twice"):
    label_map_util.get_keypoint_label_map_dict(twice)


def test_label_map_hierarchy_lut():
  label_map = _parse("""
      item { id: 1 name: 'animal' descendant_ids: [2, 3] }
      item { id: 2 name: 'dog' ancestor_ids: 1 }
      item { id: 3 name: 'cat' ancestor_ids: 1 }""")
  ancestors, descendants = label_map_util.get_label_map_hierarchy_lut(
      label_map)
  assert ancestors.tolist() == [[0, 0, 0], [1, 0, 0], [1, 0, 0]]
  assert descendants.tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]
  ancestors, _ = label_map_util.get_label_map_hierarchy_lut(
      label_map, include_identity=True)
  assert ancestors.tolist() == [[1, 0, 0], [1, 1, 0], [1, 0, 1]]


def test_max_label_map_index():
  assert label_map_util.get_max_label_map_index(_parse(_GOOD)) == 3
  assert label_map_util.get_max_label_map_index(_parse('')) == 0


def test_file_problems_name_file_line_and_column(tmp_path):
  with pytest.raises(label_map_util.LabelMapError, match='is a directory'):
    label_map_util.load_labelmap(str(tmp_path))
  path = tmp_path / 'latin1.pbtxt'
  path.write_bytes(b"item { id: 1 name: 'caf\xe9' }\n")
  with pytest.raises(label_map_util.LabelMapError) as raised:
    label_map_util.load_labelmap(str(path))
  assert str(raised.value).startswith('%s:1:24: ' % path)
  assert 'not UTF-8' in str(raised.value)
  truncated = _write(tmp_path, "item { id: 1\n name: 'a'\n")
  with pytest.raises(label_map_util.LabelMapError) as raised:
    label_map_util.load_labelmap(truncated)
  assert str(raised.value).startswith('%s:2:' % truncated)


def test_byte_order_mark_is_skipped(tmp_path):
  path = tmp_path / 'bom.pbtxt'
  path.write_bytes(b'\xef\xbb\xbf' + _GOOD.encode())
  assert label_map_util.get_label_map_dict(str(path))['dog'] == 3


def test_a_label_map_out_of_reach_is_a_label_map_error():
  # TensorFlow raises an OpError (here UnimplementedError) for a path it
  # cannot reach; gs:// without network is a FailedPreconditionError.
  path = 'nosuchscheme://bucket/label_map.pbtxt'
  with pytest.raises(label_map_util.LabelMapError) as raised:
    label_map_util.load_labelmap(path)
  assert str(raised.value).startswith(
      "%s: cannot read the label map: File system scheme 'nosuchscheme' not "
      'implemented' % path)
  assert '\n' not in str(raised.value)
