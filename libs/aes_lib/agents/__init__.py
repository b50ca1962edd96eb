"""Terminal agents: the loop shared by solver and proposer (``loop``), the solver
(``solver``), trajectories (``trajectory``), per-environment rollout history
(``history``) and the proposer harness and baselines (``proposer``)."""
