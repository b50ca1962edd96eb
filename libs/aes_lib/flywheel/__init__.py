"""The flywheel's pure logic: the calibration rule, pool state, planning and reports.

Services (``aes_services.calibrator``, ``.pool``, ``.planner``) and the CLI
(``aes run``, ``aes status``, ``aes report``, ``aes pool``) are thin shells
around these modules, which have no I/O of their own except ``pool_store``
(JetStream KV) and ``streams`` (reading result history).
"""
