"""The Servo export model_main writes after its evaluation, served.

model_main's final exporter saves the Estimator's PREDICT graph of the last
checkpoint: the model_fn and checkpoint that Estimator.predict would build
and restore again. A family's end-to-end run compares its export's
detections with this one instead, a graph loaded rather than built anew.
"""
import glob
import os

import tensorflow as tf

from tests import image_inputs
from tests import saved_models


def predictions(model_dir, image, global_step):
  """The Servo export's outputs on one image, fed as the tf.Example its
  receiver decodes: {output key: numpy value}.

  Args:
    model_dir: model_main's --model_dir (one Servo export in it).
    image: [height, width, 3] uint8.
    global_step: the step of the checkpoint it must hold (the last).
  """
  servo, = glob.glob(os.path.join(model_dir, 'export', 'Servo', '*'))
  assert tf.train.load_checkpoint(os.path.join(
      servo, 'variables', 'variables')).get_tensor(
          'global_step') == global_step
  return saved_models.serve(servo, image_inputs.tf_example(image))
