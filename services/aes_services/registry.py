"""Service names as run by ``aes service NAME`` and started by ``aes up``."""

import importlib

from aes_lib.domains import get as get_domain
from aes_lib.domains import names as domain_names
from aes_lib.models.weights import TRAINABLE

SERVICES: dict[str, str] = {
    "validator": "aes_services.validator:ValidatorService",
    "strength": "aes_services.strength:StrengthGateService",
    "attack": "aes_services.attack:AttackGateService",
    "calibrator": "aes_services.calibrator:CalibratorService",
    "pool": "aes_services.pool:PoolService",
    "pool-review": "aes_services.pool:PoolReviewService",
    "pool-watch": "aes_services.pool:PolicyWatchService",
    "planner-stats": "aes_services.planner:RolloutStatsService",
    "planner": "aes_services.planner:PlannerService",
    "contamination": "aes_services.contamination:ContaminationService",
    "novelty": "aes_services.novelty:NoveltyGateService",
    "review": "aes_services.review:ReviewService",
    "reset": "aes_services.reset_gate:ResetGateService",
    "proposer": "aes_services.proposer:ProposerService",
    "orchestrator": "aes_services.orchestrator:OrchestratorService",
    "orchestrator-solver": "aes_services.orchestrator:SolverOrchestratorService",
    "orchestrator-proposer": "aes_services.orchestrator:ProposerOrchestratorService",
    "learner": "aes_services.learner:LearnerService",
    "learner-solver": "aes_services.learner:SolverLearnerService",
    "learner-proposer": "aes_services.learner:ProposerLearnerService",
    "proposer-samples": "aes_services.proposer_samples:ProposerSampleService",
    "training-wave": "aes_services.training:WavePlannerService",
    "rollouts": "aes_services.training:TrainingRolloutService",
    "weight-sync": "aes_services.serving:WeightSyncService",
    "metrics": "aes_services.metrics:MetricsService",
}

DOMAIN_GATES: dict[str, str] = {
    f"domain-{name}": gate for name in domain_names() if (gate := get_domain(name).gate)}
"""One gate service per domain that has one (every ``aes.domains`` plug-in, ours included); it consumes
``aes.candidate.<domain>``, the head of that domain's candidates' route."""
SERVICES.update(DOMAIN_GATES)

SHARED_LEARNERS = ("orchestrator", "learner")
"""One policy for both roles: the orchestrator packs its updates, the learner (the trainer) trains them."""
SEPARATE_LEARNERS = ("orchestrator-solver", "learner-solver", "orchestrator-proposer", "learner-proposer")
"""With ``AES_POLICY_MODE=separate`` these replace ``SHARED_LEARNERS`` (one model per role)."""
TRAINING = (*SHARED_LEARNERS, *SEPARATE_LEARNERS, "proposer-samples", "training-wave", "rollouts", "weight-sync")
"""The services that close the training loop; the stack starts them only with an engine that
follows the learner's weights (``AES_ENGINE=vllm`` or ``torch``)."""
TRAIN = ("learner", "learner-solver", "learner-proposer", "weight-sync", "metrics")
"""The services that need the ``train`` extra (torch, transformers, safetensors, tensorboard), so
the training image; every other one runs on the smaller service image (compose.yaml, deploy/k8s)."""


def stack_services(engine: str, policy_mode: str, route: tuple[str, ...] = ()) -> dict[str, str]:
    """The services ``aes up`` starts for this engine, policy mode and route (``AES_ROUTE``)."""
    if policy_mode not in ("shared", "separate"):
        raise ValueError(f"AES_POLICY_MODE must be shared or separate, got {policy_mode!r}")
    skip = set(TRAINING) if engine not in TRAINABLE else (
        set(SHARED_LEARNERS) if policy_mode == "separate" else set(SEPARATE_LEARNERS))
    skip |= {name for name in OPTIONAL_GATES if service_class(SERVICES[name]).stage not in route}
    return {name: spec for name, spec in SERVICES.items() if name not in skip}

ADMISSION = ("validator", "strength", "contamination", "novelty", "review", "reset", "calibrator")
"""The built-in services that consume the default route's admission stages (``aes.candidate.<stage>``)."""
OPTIONAL_GATES = ("attack",)
"""Built-in gates off the default route (each costs model episodes per candidate): the stack starts
one only when ``AES_ROUTE`` names its stage."""


def service_class(spec: str) -> type:
    """The class named by ``module:Class``."""
    module, _, cls = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as e:
        # Only a training service's missing third-party package means the train extra is absent
        # (a plug-in's missing dependency is its own).
        if spec not in {SERVICES[name] for name in TRAIN} or (e.name or "").startswith("aes_"):
            raise
        raise ModuleNotFoundError(f"{spec} needs {e.name!r}, which is not installed; the training services "
                                  f"({', '.join(TRAIN)}) need pip install 'autoenvscaling[train]'", name=e.name) from e


def builtin_stages() -> dict[str, bool]:
    """Stage name -> whether it decides, for the built-in admission services and domain gates."""
    from aes_lib.admission import stages_of

    return stages_of(service_class(SERVICES[name]) for name in (*ADMISSION, *OPTIONAL_GATES, *DOMAIN_GATES))
