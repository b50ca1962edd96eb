"""The red team's fixture tasks under ``tasks/`` (their test_*.py run inside containers only)."""

collect_ignore = ["tasks"]
