"""Weight transports: how each new policy version gets from the trainer to the engines.

One interface (``transport.WeightTransport``), one call for the trainer
(``publish.publish_version``), the implementation picked by ``AES_WEIGHT_TRANSPORT`` (``publish``):

- ``filesystem`` (``filesystem.FilesystemTransport``): the trainer writes the version's HF
  folder once, where the engines read it (``AES_WEIGHTS_DIR``, one machine or a shared
  mount); vLLM and the torch engine load it in place (``PolicyVersion.folder``).
- ``store`` (``store.StoreTransport``): the folder goes to the blob store and weight sync
  fetches it next to each engine (engines on other machines).
- ``nccl`` (``nccl.NcclTransport``): the trainer broadcasts its parameters to vLLM's GPU
  workers (``aes_lib.models.nccl_weights``), then keeps the record in the store.

The engine side follows the ``PolicyVersion`` message whatever the transport
(``aes_lib.models.weights``); the version each completion was sampled by comes back on the
completion itself (``aes_lib.models.served_version``).
"""
