VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3.11

.PHONY: install protos test demo bench clean
PROTOS := $(wildcard protos/*.proto)
PROTOS_BUILT := od_estimator/protos/.built

$(VENV)/.installed: setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip 'setuptools>=64' wheel 'grpcio-tools>=1.62,<1.63'
	$(PY) -m pip install -e '.[test]'
	touch $@

install: $(VENV)/.installed $(PROTOS_BUILT)

# od_estimator/protos/*_pb2.py, regenerated whenever a .proto changes.
$(PROTOS_BUILT): $(PROTOS) $(VENV)/.installed
	$(PY) setup.py -q build_protos
	touch $@

protos: $(PROTOS_BUILT)

test: install
	$(PY) -m pytest -q tests

DEMO_CONFIG := samples/configs/ssd_mobilenet_v2_shapes.config
DEMO_DIR := demo_out

# The demo, end to end on synthetic data. Until the model lands (issues 6-8)
# it writes the data and validates the demo config against it.
demo: install
	$(PY) -m od_estimator.dataset_tools.create_synthetic_tf_record --output_dir=$(DEMO_DIR)/data
	$(PY) -m od_estimator.validate --pipeline_config_path=$(DEMO_CONFIG)

clean:
	rm -rf $(VENV) build *.egg-info od_estimator/protos/*_pb2.py $(PROTOS_BUILT)
