"""Service names as run by ``aes service NAME`` and started by ``aes up``."""

SERVICES: dict[str, str] = {
    "validator": "aes_services.validator:ValidatorService",
}
