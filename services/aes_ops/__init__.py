"""Operator tools: what a person runs the pipeline with, as a library the CLI is a thin shell over.

- ``stack``: the embedded stack (nats-server, blob store, model server, every service as a process)
- ``service``: one service as a process, its replicas, or a learner's ranks (``aes service``)
- ``connect``: a command's one connection to the stack (the bus, the pool)
- ``runs``: the flywheel end to end, or training waves alone (``aes run``, ``aes train``)
- ``rounds``, ``waves``: drive flywheel rounds and training waves over the bus, with progress
- ``readout``, ``report``: status and the HTML report from the streams and the pool
- ``validation``, ``seeding``: tasks validated as the validator would; seed tasks and Harbor datasets into the pool
- ``contamination``: the held-out index registered for the gate, and checks against it
- ``solve``, ``compare``: one solver attempt (``aes solve``); the generation modes side by side (``aes generate``)
- ``policies``: published policy versions as folders other tools load (``aes policy export``)
- ``evaluate``, ``evaluation``: a policy on held-out tasks and its avg@k statistics (``aes eval``)
- ``pools``, ``experiment``: the pools experiment, a static pool against the flywheel (``aes experiment pools``)

Services never import this package; it imports services only to start them.
"""
