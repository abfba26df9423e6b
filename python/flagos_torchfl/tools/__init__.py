"""Migration tools: `flagos-torchfl ops | coverage | doctor | bench | validate`.

Each command is one module with a Python API (returns a plain, JSON-ready
dict) and the two CLI hooks __main__ uses (`add_arguments`, `command`):

    ops.support_list(backend)           the catalog and the tier of each overload
    coverage.coverage(model, backends)  the ATen ops a model uses, tier per backend
    doctor.doctor()                     environment findings with severity and fix
    bench.bench(model)                  latency, throughput, memory, per-op times
    validate.validate(level, model)     operators / inference / training vs CPU,
                                        DDP on N processes (level 4, _multidevice.py)
    regression.regression(config)       levels 1-4 for each model of a config (level 5)

Models are given as in _model.py (docs/tools.md). Nothing here imports torch
at import time: the CLI stays cheap until a command runs.
"""
