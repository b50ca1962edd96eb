"""The flywheel's rules, as pure functions and values: the calibration rule (``calibration``,
``calibrate``), pool transitions (``pool``), planning (``planner``), revisions
(``revision``), training-wave sampling (``training``), summaries (``status``), the pools
experiment's control arms and read-outs (``controls``, ``readouts``) and their settings
(``config``, ``experiment``). ``aes_lib.runners`` carries them out against KV, the bus and Docker; the
services (``aes_services``) and operator tools (``aes_ops``) are thin shells around both.
"""
