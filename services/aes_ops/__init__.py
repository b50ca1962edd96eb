"""Operator tools: what a person runs the pipeline with, as a library the CLI is a thin shell over.

- ``stack``: the embedded stack (nats-server, blob store, model server, every service as a process)
- ``rounds``, ``waves``: drive flywheel rounds and training waves over the bus, with progress
- ``readout``, ``report``: status and the HTML report from the streams and the pool
- ``seeding``: the bundled seed tasks into the pool
- ``compare``: the generation modes side by side (``aes generate``)
- ``evaluate``, ``evaluation``: a policy on held-out tasks and its avg@k statistics (``aes eval``)
- ``pools``, ``experiment``: the pools experiment, a static pool against the flywheel (``aes experiment pools``)

Services never import this package; it imports services only to start them.
"""
