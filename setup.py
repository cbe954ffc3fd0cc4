"""od_estimator: the TF1 Object Detection API's Estimator path, maintained."""
import glob
import os
import shutil
import tempfile

from setuptools import Command, find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def compile_protos():
  """Compiles protos/*.proto into od_estimator/protos/*_pb2.py.

  The .proto files import each other as "od_estimator/protos/x.proto" so that
  the generated modules import each other as od_estimator.protos.x_pb2; they
  are staged under that path in a temporary include root.
  """
  from grpc_tools import protoc  # pylint: disable=g-import-not-at-top
  sources = sorted(glob.glob(os.path.join(HERE, 'protos', '*.proto')))
  with tempfile.TemporaryDirectory() as root:
    staged = os.path.join(root, 'od_estimator', 'protos')
    os.makedirs(staged)
    for source in sources:
      shutil.copy(source, staged)
    names = ['od_estimator/protos/' + os.path.basename(s) for s in sources]
    well_known = os.path.join(os.path.dirname(protoc.__file__), '_proto')
    status = protoc.main(['protoc', '-I' + root, '-I' + well_known,
                          '--python_out=' + HERE] + names)
  if status != 0:
    raise RuntimeError('protoc failed on protos/*.proto (status %d)' % status)


class BuildProtos(Command):
  """`python setup.py build_protos`: regenerates the *_pb2.py modules."""
  description = 'compile protos/*.proto into od_estimator/protos'
  user_options = []

  def initialize_options(self):
    pass

  def finalize_options(self):
    pass

  def run(self):
    compile_protos()


class BuildPyWithProtos(build_py):

  def run(self):
    compile_protos()
    super().run()


setup(
    name='od_estimator',
    version='0.1.0',
    description=('Object detection on tf.estimator, compatible with the TF1 '
                 'Object Detection API configs, data and checkpoints.'),
    python_requires='>=3.11,<3.12',
    packages=find_packages(include=['od_estimator', 'od_estimator.*']),
    cmdclass={'build_py': BuildPyWithProtos, 'build_protos': BuildProtos},
    install_requires=[
        'tensorflow-cpu==2.15.1',
        'tensorflow-estimator==2.15.0',
        'tf-slim==1.1.0',
        'protobuf>=4.25,<4.26',
        'numpy>=1.23.5,<2',
        'absl-py',
        'Pillow',
        'pycocotools',
        'faster-coco-eval',
        # Colour maps of the original's visualization_utils (its dependency
        # too), and bench/scaling.py's plot.
        'matplotlib>=3.8,<3.10',
        # TensorBoard 2.15 imports pkg_resources, which setuptools 81
        # removed: without this pin `tensorboard` fails to start.
        'setuptools>=64,<81',
    ],
    extras_require={
        'test': ['pytest', 'pytest-xdist', 'grpcio-tools>=1.62,<1.63'],
        # The Context R-CNN dataset tools (dataset_tools/context_rcnn) are
        # Beam pipelines; 2.61 is the release tested beside TF 2.15
        # (protobuf 4.25, numpy < 2: `pip check` finds no conflict).
        'beam': ['apache-beam>=2.61,<2.62'],
        # `od-estimator export_onnx` (export/onnx_export.py). onnx 1.19+
        # needs ml_dtypes 0.5, TF 2.15 pins 0.3: 1.18 is the last release
        # that imports beside it. tf2onnx 1.17 is the first release without
        # protobuf 3; `pip check` finds no conflict with these.
        'onnx': ['tf2onnx>=1.17,<1.18', 'onnx>=1.17,<1.19',
                 'onnxruntime>=1.32,<1.33'],
    },
    entry_points={
        'console_scripts': [
            'od-estimator=od_estimator.__main__:main',
            'model_main=od_estimator.model_main:run',
            'model_tpu_main=od_estimator.model_tpu_main:run',
            # The original's TF2-era commands, on the same engine.
            'model_main_tf2=od_estimator.model_main_tf2:run',
            'exporter_main_v2=od_estimator.exporter_main_v2:main',
            'export_tflite_graph_tf2='
            'od_estimator.compat.export_tflite_graph_tf2:main',
            # The original's legacy train.py / eval.py.
            'od-estimator-legacy-train=od_estimator.legacy.train:run',
            'od-estimator-legacy-eval=od_estimator.legacy.eval:run',
            'export_inference_graph=od_estimator.export_inference_graph:main',
            'export_tflite_ssd_graph=od_estimator.export_tflite_ssd_graph:main',
            'create_coco_tf_record='
            'od_estimator.dataset_tools.create_coco_tf_record:main',
            'create_pascal_tf_record='
            'od_estimator.dataset_tools.create_pascal_tf_record:main',
            'create_pet_tf_record='
            'od_estimator.dataset_tools.create_pet_tf_record:main',
            'create_synthetic_tf_record='
            'od_estimator.dataset_tools.create_synthetic_tf_record:main',
            # The original's Context R-CNN Beam pipelines (extra: beam).
            'create_cococameratraps_tfexample_main='
            'od_estimator.dataset_tools.context_rcnn.create_cococameratraps_tfexample_main:main',
            'add_context_to_examples='
            'od_estimator.dataset_tools.context_rcnn.add_context_to_examples:main',
            'generate_detection_data='
            'od_estimator.dataset_tools.context_rcnn.generate_detection_data:main',
            'generate_embedding_data='
            'od_estimator.dataset_tools.context_rcnn.generate_embedding_data:main',
        ],
    },
)
