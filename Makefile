# Two commands do all setup: `make demo` and `make test` each create .venv and
# install the project with its dependencies when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint fixtures bench eb-fixtures clean screenshot js conformance differential

# The stamp also follows the C sources: an editable install compiles bundler/core/*.c once,
# so a changed source needs a new install to take effect.
$(STAMP): pyproject.toml setup.py bundler/core/_jcs.c bundler/core/_files.c
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (set PYTHON=...)")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py

# Two workers (the machines have two cores); the adversarial suites are large.
# axe-core, for the accessibility check of the auditor's page (a test-only npm package).
AXE := tests/.node/node_modules/axe-core/axe.min.js
$(AXE):
	npm install --prefix tests/.node --no-audit --no-fund --silent axe-core

# The JavaScript verifier (js/, SPEC 15): its npm packages, pinned by js/package-lock.json.
JS_STAMP := js/node_modules/.package-lock.json
$(JS_STAMP): js/package.json js/package-lock.json
	npm ci --prefix js --no-audit --no-fund --silent

test: $(STAMP) $(AXE) $(JS_STAMP)
	$(PY) -m pytest -q -n 2 --durations=30
	node --test js/test/

# The offline verifier page, rebuilt byte for byte from js/src (committed as js/dist/).
js: $(JS_STAMP)
	node js/build.mjs

# The conformance corpus against both verifiers (conformance/README.md).
conformance: $(STAMP) $(JS_STAMP)
	$(PY) conformance/build.py conformance/build
	PYTHON=$(CURDIR)/$(PY) $(PY) conformance/run.py conformance/build conformance/runners/python conformance/runners/node

# Random mutations of real bundles: both verifiers must agree (exit code, failed claims).
DIFFERENTIAL_N ?= 100000
differential: $(STAMP) $(JS_STAMP)
	$(PY) conformance/differential.py --n $(DIFFERENTIAL_N)

lint: $(STAMP)
	$(VENV)/bin/ruff check bundler tests bench scripts
	$(VENV)/bin/mypy

fixtures: $(STAMP)
	$(PY) -m bundler.testing.fixturegen fixtures/stores --force
	$(PY) -m bundler.testing.fixtures_audit fixtures/stores --force

# The README's picture of the auditor's page: the demo's page of its tampered bundle, in
# headless Chromium with the network off.
screenshot: $(STAMP)
	test -f out/demo/page-tampered.html || $(PY) scripts/demo.py
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
	  --proxy-server=127.0.0.1:9 --window-size=1100,1900 \
	  --screenshot=$(CURDIR)/docs/page-verify.png file://$(CURDIR)/out/demo/page-tampered.html

bench: $(STAMP)
	$(PY) bench/run.py --fixity --import

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache bundler/*.so

# Regenerates the committed Inspect AI and lm-evaluation-harness runs offline, with the
# runners in their own Python 3.12 virtualenv (never dependencies of the toolkit).
.PHONY: runner-fixtures
runner-fixtures:
	fixtures/runners/regenerate.sh

# Regenerates the committed eval-banana runs with the real eb 0.5.0 (needs Python 3.12).
eb-fixtures:
	fixtures/eval-banana/regenerate.sh

# The fuzz campaign of tests/test_fuzz_campaign.py, longer: FUZZ_EXAMPLES examples per
# test (five tests) with fresh random seeds; figures with --hypothesis-show-statistics.
FUZZ_EXAMPLES ?= 400
.PHONY: fuzz-long
fuzz-long: $(STAMP)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_RANDOM=1 $(PY) -m pytest -q --hypothesis-show-statistics tests/test_fuzz_campaign.py
