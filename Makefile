# Two commands do all the set-up on a fresh machine:
#   make run    -> creates .venv from the hash-checked lock the first time, then starts the app
#   make test   -> the same set-up, then the whole test suite (engine and GUI as two pytest processes);
#                  the real agents of tests/agents are installed from their npm lock (needs Node >= 20, npm)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# llama-cpp-python builds from source; a native build dies with "Illegal instruction" here.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
export LITELLM_LOCAL_MODEL_COST_MAP := True
export QT_API := pyside6

AGENTS := tests/agents
AGENTS_STAMP := $(AGENTS)/node_modules/.installed

.PHONY: run test test-engine test-gui lint bench screenshot lock clean agents-latest

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	$(BIN)/python -m pip install --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

# The real agents (pinned npm packages, native binaries inside) that tests/agents runs offline.
$(AGENTS_STAMP): $(AGENTS)/package.json $(AGENTS)/package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
		echo "make test: the real-agent tests (tests/agents) need Node >= 20 and npm; install them (Debian/Ubuntu: apt install nodejs npm)" >&2; exit 2; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { \
		echo "make test: the real-agent tests (tests/agents) need Node >= 20; found $$(node --version)" >&2; exit 2; }
	npm ci --prefix $(AGENTS) --no-audit --no-fund --loglevel=error
	touch $@

# (the tree's bytecode written first, as pip writes an installed package's: every start then loads it, not compiles
# every module again, which it does where PYTHONDONTWRITEBYTECODE is set)
run: $(STAMP)
	@$(BIN)/python -m compileall -q app engine widgets > /dev/null
	$(BIN)/ctxbench $(ARGS)

test: $(STAMP) $(AGENTS_STAMP)
	$(BIN)/python -m ruff check app engine widgets tests benchmarks
	$(BIN)/python -m mypy
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest tests/engine tests/agents tests/benchmarks tests/test_*.py $(PYTEST_ARGS)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest tests/app tests/widgets -p no:asyncio $(PYTEST_ARGS)

# The real-agent tier against the newest npm version of every agent (a scratch copy; the pins stay): what is new
agents-latest: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m tests.agents.latest $(ARGS)

lint: $(STAMP)
	$(BIN)/python -m ruff check app engine widgets tests benchmarks
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(ARGS)

# The README's picture: a real Claude Code session (shared test data beside the clone), its compaction
# and the cache view; without ../shared, the bundled sample session.
SHOT_SESSION := ../shared/data/sessions/claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl
screenshot: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m app.screenshot docs/screenshot.png \
		$(if $(wildcard $(SHOT_SESSION)),--source $(SHOT_SESSION) --cache-view,)

# Regenerate the lock (needs pip-tools): make lock
lock:
	$(BIN)/python -m piptools compile --generate-hashes --allow-unsafe --strip-extras -o requirements.lock requirements.in

clean:
	rm -rf $(VENV) build *.egg-info $(AGENTS)/node_modules
