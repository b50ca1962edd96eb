"""Harbor-style fixture tasks (``tasks/``), checked against Harbor itself (the root conftest's
``harbor`` fixture)."""

collect_ignore = ["tasks"]  # the fixture tasks' own test_*.py run inside containers only
