VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3.11

.PHONY: install protos test durations demo demo_faster_rcnn demo_mask_rcnn demo_efficientdet bench clean
PROTOS := $(wildcard protos/*.proto)
PROTOS_BUILT := od_estimator/protos/.built

$(VENV)/.installed: setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip 'setuptools>=64,<81' wheel 'grpcio-tools>=1.62,<1.63'
	$(PY) -m pip install -e '.[test,beam,onnx]'
	touch $@

install: $(VENV)/.installed $(PROTOS_BUILT)

# od_estimator/protos/*_pb2.py, regenerated whenever a .proto changes.
$(PROTOS_BUILT): $(PROTOS) $(VENV)/.installed
	$(PY) setup.py -q build_protos
	touch $@

protos: $(PROTOS_BUILT)

# Three workers on two cores: with two, the cores idled a sixth of the run
# while workers waited on subprocesses (signals, clusters, continuous
# evaluation); a third fills it (2 idle cores: 21 min with -n 2, 16 with 3).
# Python's bytecode cache on even where the environment turns it off
# (PYTHONDONTWRITEBYTECODE): the suite starts a Python process about a
# hundred times, and each would compile the package (and pytest rewrite the
# tests' asserts) again.
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 3 --dist loadscope \
	  --no-loadscope-reorder
test: install
	$(PYTEST) tests

# `make test`, then tests/durations.txt rewritten from its timings (the
# order in which the modules start; see tests/conftest.py). Commit it.
durations: install
	$(PYTEST) tests --write-durations

DEMO_CONFIG := samples/configs/ssd_mobilenet_v2_shapes.config
DEMO_DIR := demo_out

# The demo, end to end on synthetic shapes: data, validate, train with
# evaluation (COCO numbers printed at the end), export a SavedModel, and
# detect on a new image (annotated copy in $(DEMO_DIR)/detections).
demo: install
	$(PY) -m od_estimator.dataset_tools.create_synthetic_tf_record \
	  --output_dir=$(DEMO_DIR)/data --num_sample_images=1
	$(PY) -m od_estimator.validate --pipeline_config_path=$(DEMO_CONFIG)
	rm -rf $(DEMO_DIR)/model $(DEMO_DIR)/exported
	$(PY) -m od_estimator.model_main --pipeline_config_path=$(DEMO_CONFIG) \
	  --model_dir=$(DEMO_DIR)/model --save_checkpoints_steps=500 --log_every_n_steps=100
	$(PY) -m od_estimator.export_inference_graph --input_type=image_tensor \
	  --pipeline_config_path=$(DEMO_CONFIG) \
	  --trained_checkpoint_prefix=$(DEMO_DIR)/model \
	  --output_directory=$(DEMO_DIR)/exported
	$(PY) -m od_estimator.detect --saved_model_dir=$(DEMO_DIR)/exported \
	  --label_map_path=$(DEMO_DIR)/data/shapes_label_map.pbtxt \
	  --input=$(DEMO_DIR)/data/images --output_dir=$(DEMO_DIR)/detections
	@echo "Exported model: $(DEMO_DIR)/exported/saved_model"
	@echo "Annotated image: $(DEMO_DIR)/detections/shapes_0_detections.png"

FRCNN_CONFIG := samples/configs/faster_rcnn_resnet50_shapes.config
FRCNN_DIR := $(DEMO_DIR)/faster_rcnn

# The same demo with the two-stage model: Faster R-CNN ResNet-50 on the same
# shapes data, its model, export and detections under $(FRCNN_DIR). One
# evaluation, at the last step: before ~1000 steps the batch-norm moving
# averages that evaluation uses have not settled (see the config).
# demo_mask_rcnn: the same with Mask R-CNN (box and mask metrics), under
# $(DEMO_DIR)/mask_rcnn.
# demo_efficientdet: the same with a small EfficientDet (D0's model from
# scratch), under $(DEMO_DIR)/efficientdet.
demo_mask_rcnn: FRCNN_CONFIG := samples/configs/mask_rcnn_resnet50_shapes.config
demo_mask_rcnn: FRCNN_DIR := $(DEMO_DIR)/mask_rcnn
demo_efficientdet: FRCNN_CONFIG := samples/configs/ssd_efficientdet_d0_shapes.config
demo_efficientdet: FRCNN_DIR := $(DEMO_DIR)/efficientdet
demo_faster_rcnn demo_mask_rcnn demo_efficientdet: install
	$(PY) -m od_estimator.dataset_tools.create_synthetic_tf_record \
	  --output_dir=$(DEMO_DIR)/data --num_sample_images=1
	$(PY) -m od_estimator.validate --pipeline_config_path=$(FRCNN_CONFIG)
	rm -rf $(FRCNN_DIR)
	$(PY) -m od_estimator.model_main --pipeline_config_path=$(FRCNN_CONFIG) \
	  --model_dir=$(FRCNN_DIR)/model --save_checkpoints_steps=1200 \
	  --log_every_n_steps=100
	$(PY) -m od_estimator.export_inference_graph --input_type=image_tensor \
	  --pipeline_config_path=$(FRCNN_CONFIG) \
	  --trained_checkpoint_prefix=$(FRCNN_DIR)/model \
	  --output_directory=$(FRCNN_DIR)/exported
	$(PY) -m od_estimator.detect --saved_model_dir=$(FRCNN_DIR)/exported \
	  --label_map_path=$(DEMO_DIR)/data/shapes_label_map.pbtxt \
	  --input=$(DEMO_DIR)/data/images --output_dir=$(FRCNN_DIR)/detections
	@echo "Exported model: $(FRCNN_DIR)/exported/saved_model"
	@echo "Annotated image: $(FRCNN_DIR)/detections/shapes_0_detections.png"

# Every benchmark side by side in one run; writes bench/RESULTS.md.
bench: install
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info od_estimator/protos/*_pb2.py $(PROTOS_BUILT)
