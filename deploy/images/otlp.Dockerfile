# Local stand-in for Jaeger's OTLP/HTTP receiver (no registry here): the service image running
# aes_ops.otlp_sink on OTLP/HTTP's port; GET /traces lists each trace's services.
ARG AES_SERVICE_IMAGE=autoenvscaling:local
FROM ${AES_SERVICE_IMAGE}
EXPOSE 4318
ENTRYPOINT ["python", "-m", "aes_ops.otlp_sink", "--host", "0.0.0.0", "--port", "4318"]
CMD []
