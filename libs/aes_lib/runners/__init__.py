"""What carries the flywheel's rules out: the pool in JetStream KV (``pool_store``), solver
rollouts with their KV cache (``rollouts``), and the real solver in a Docker sandbox
(``trial_runner``)."""
