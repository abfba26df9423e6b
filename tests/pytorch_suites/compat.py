"""Version-skew shims for PyTorch's test files (a pytest plugin, `-p compat`).

The suites come from PyTorch's repository, whose files may be newer than
the installed torch's testing helpers. Names a newer file imports that the
installed torch lacks are defined here, as the file expects them, so that
the suite collects; a test that then fails on CPU as well is reported as
version skew by run.py, never as ours. Each shim says what it stands for.
"""

import enum

import torch
import torch.testing._internal.common_dtype as common_dtype
import torch.testing._internal.common_utils as common_utils


def _define(module, name, value):
    if not hasattr(module, name):
        setattr(module, name, value)


# Dtypes of operators that only move data (flip, roll, ...): every dtype
# the installed torch's all_types_and_complex_and() names, plus bool and the
# 16-bit floats.
def _all_passthru_types_and(*dtypes):
    return common_dtype.all_types_and_complex_and(torch.bool, torch.half, torch.bfloat16, *dtypes)


_define(common_dtype, "all_passthru_types_and", _all_passthru_types_and)
_define(common_dtype, "all_passthru_types", lambda: _all_passthru_types_and())

# The unsigned types beyond uint8 that only move data.
_define(
    common_dtype, "barebones_unsigned_types", lambda: (torch.uint16, torch.uint32, torch.uint64)
)


# Newer test classes tag themselves GENERIC (device-independent, run once),
# ACCELERATOR or CUDA (a plain TestCase of CUDA-only tests); the installed
# torch has no such classification and runs every device-generic class per
# device, which is what the harness wants.
class HardwareClassification(enum.Enum):
    GENERIC = "generic"
    ACCELERATOR = "accelerator"
    CUDA = "cuda"


_define(common_utils, "HardwareClassification", HardwareClassification)
