r"""The original's side of item 12: its TF2 exports of one network.

Runs in the original's environment (bench/.orig_venv, or the interpreter
given to bench/orig_inference.py), never in ours: builds the original's
detection model for inference from a pipeline config with its own
model_builder, creates its variables with one call on a blank image of the
config's size, saves them as an object-based checkpoint (ckpt-0 under
`model/`, as its TF2 training loop keys them), then exports that checkpoint
with its own exporter_lib_v2 once per --input_types entry, into
OUTPUT_DIR/<input_type>/saved_model. Prints one `RESULT {json}` line with
the checkpoint directory and the SavedModels' paths.

  bench/.orig_venv/bin/python bench/orig_export.py \
      --pipeline_config_path=pipeline.config --output_dir=/tmp/orig \
      --size=300
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# orig_step sets the environment the original's package needs (pure-Python
# protobuf, tf_slim's moved control flow names) before importing it.
import orig_step  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from object_detection import exporter_lib_v2  # pylint: disable=g-import-not-at-top,wrong-import-position
from object_detection.builders import model_builder  # pylint: disable=g-import-not-at-top,wrong-import-position
from object_detection.utils import config_util  # pylint: disable=g-import-not-at-top,wrong-import-position


def save_random_checkpoint(configs, size, directory):
  """The model's freshly initialized variables as directory/ckpt-0."""
  model = model_builder.build(model_config=configs['model'],
                              is_training=False)
  images, shapes = model.preprocess(tf.zeros([1, size, size, 3]))
  model.postprocess(model.predict(images, shapes), shapes)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model),
                                       directory, max_to_keep=1)
  return manager.save(checkpoint_number=0)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--pipeline_config_path', required=True)
  parser.add_argument('--output_dir', required=True)
  parser.add_argument('--size', type=int, required=True,
                      help='Image size of the blank image that creates '
                           'the variables.')
  parser.add_argument('--input_types',
                      default='image_tensor,float_image_tensor')
  args = parser.parse_args(argv)
  configs = config_util.get_configs_from_pipeline_file(
      args.pipeline_config_path)
  checkpoint_dir = os.path.join(args.output_dir, 'checkpoint')
  save_random_checkpoint(configs, args.size, checkpoint_dir)
  pipeline = config_util.create_pipeline_proto_from_configs(configs)
  exports = {}
  for input_type in args.input_types.split(','):
    directory = os.path.join(args.output_dir, input_type)
    exporter_lib_v2.export_inference_graph(input_type, pipeline,
                                           checkpoint_dir, directory)
    exports[input_type] = os.path.join(directory, 'saved_model')
  print('RESULT ' + json.dumps({'checkpoint_dir': checkpoint_dir,
                                'saved_models': exports,
                                'tf_version': tf.__version__}))
  return 0


if __name__ == '__main__':
  sys.exit(main())
