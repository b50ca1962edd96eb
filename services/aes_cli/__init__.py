"""The ``aes`` command line."""
