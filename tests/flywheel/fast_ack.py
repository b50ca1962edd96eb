"""``aes service fast_ack:NAME``: registered service NAME with a short ack_wait.

A SIGKILLed handler never naks; JetStream redelivers its message after
``ack_wait``. Production values (up to minutes) would make a kill test wait that
long, so the test runs the real services through ``aes service`` with
``AES_TEST_ACK_WAIT`` seconds instead.
"""

import os

from aes_ops.service import load_service


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    cls = load_service(name)
    return type(cls.__name__, (cls,), {"ack_wait": float(os.environ.get("AES_TEST_ACK_WAIT", "8"))})
