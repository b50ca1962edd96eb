"""The chaos suite (``make chaos``, ``python bench/chaos``): ``__main__`` is the entry point."""
