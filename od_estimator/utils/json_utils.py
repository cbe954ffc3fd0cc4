"""JSON writing with a fixed number of float digits, as the original's
object_detection.utils.json_utils (coco_tools writes its files with it).

Every float written as digits.digits is formatted with `float_digits`
digits after the point ('%.4f': 0.5 → 0.5000); strings are left alone.
"""
import json
import re

# A JSON string literal (kept as it is) or a number with a decimal point.
_STRING_OR_FLOAT = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+\.\d+')


def FormatFloat(json_str, float_digits):  # pylint: disable=invalid-name
  """`json_str` with each decimal number written with float_digits digits."""
  def format_match(match):
    text = match.group()
    if text.startswith('"'):
      return text
    return '%.*f' % (float_digits, float(text))
  return _STRING_OR_FLOAT.sub(format_match, json_str)


def Dumps(obj, float_digits=-1, **params):  # pylint: disable=invalid-name
  """json.dumps(obj, **params), floats rounded when float_digits > -1."""
  json_str = json.dumps(obj, **params)
  if float_digits > -1:
    json_str = FormatFloat(json_str, float_digits)
  return json_str


def Dump(obj, fid, float_digits=-1, **params):  # pylint: disable=invalid-name
  """Writes Dumps(obj, float_digits, **params) to the open file `fid`."""
  fid.write(Dumps(obj, float_digits, **params))


def PrettyParams(**params):  # pylint: disable=invalid-name
  """params plus 4 float digits, sorted keys, indent 2, (',', ': ')."""
  params.update(float_digits=4, sort_keys=True, indent=2,
                separators=(',', ': '))
  return params
