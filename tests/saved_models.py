"""A SavedModel's signature run in a TF1 session, as `detect` serves it.

TF2's tf.saved_model.load wraps the graph into a function per signature,
a few seconds more per model for the same graph and outputs. The tests of
that loading itself (test_export_vs_estimator, the exporter's fresh
interpreter in tests/export/test_exporter.py) keep it.
"""
import tensorflow as tf


def serve(directory, inputs, signature='serving_default'):
  """{output key: numpy value} of the signature fed `inputs`.

  Args:
    directory: the SavedModel.
    inputs: the value of the signature's one input, or a dict from each
      signature input key to its value (a model with side inputs).
    signature: the signature's key.
  """
  with tf.Graph().as_default() as graph, tf.compat.v1.Session(
      graph=graph) as session:
    meta_graph = tf.compat.v1.saved_model.loader.load(
        session, [tf.compat.v1.saved_model.tag_constants.SERVING],
        directory)
    served = meta_graph.signature_def[signature]
    if isinstance(inputs, dict):
      assert set(inputs) == set(served.inputs), (sorted(served.inputs))
      feed = {served.inputs[key].name: value for key, value in inputs.items()}
    else:
      (info,) = served.inputs.values()
      feed = {info.name: inputs}
    return session.run({key: info.name for key, info in
                        served.outputs.items()}, feed)
