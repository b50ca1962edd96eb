# Shared base of every sandbox image: a minbase Debian with python3, pytest
# (the managed verifier runs offline) and the tools seed tasks use.
FROM aes-rootfs:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-pytest git jq sqlite3 procps make file bc patch diffutils \
 && rm -rf /var/lib/apt/lists/*
CMD ["sleep", "infinity"]
