"""Service names as run by ``aes service NAME`` and started by ``aes up``."""

SERVICES: dict[str, str] = {
    "validator": "aes_services.validator:ValidatorService",
    "calibrator": "aes_services.calibrator:CalibratorService",
    "pool": "aes_services.pool:PoolService",
    "pool-review": "aes_services.pool:PoolReviewService",
    "pool-watch": "aes_services.pool:PolicyWatchService",
    "planner-stats": "aes_services.planner:RolloutStatsService",
    "planner": "aes_services.planner:PlannerService",
    "contamination": "aes_services.contamination:ContaminationService",
    "review": "aes_services.review:ReviewService",
    "reset": "aes_services.reset_gate:ResetGateService",
    "proposer": "aes_services.proposer:ProposerService",
    "learner": "aes_services.learner:LearnerService",
}
