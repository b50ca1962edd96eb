"""The domains this project ships, one sub-package each (data and code beside each other):
``swe``, ``tool_calling``, ``browser``, ``gpu_kernels``, ``ask_human``.

They are plug-ins like any other: each registers through the ``aes.domains`` entry point
group in ``pyproject.toml`` and ``aes_lib.domains.registry`` finds it there; the library
imports none of them. A domain of another project is a package of its own that declares the
same entry point (``name = "module"``, the module holding ``DOMAIN``)."""
