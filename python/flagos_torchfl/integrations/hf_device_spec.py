"""A device spec for transformers' own test suite on flagos.

transformers' tests run on any device named by a spec file
(TRANSFORMERS_TEST_DEVICE_SPEC; it must be a path relative to where pytest
runs, since transformers imports it by that name):

    cp "$(python -c 'import flagos_torchfl.integrations.hf_device_spec as m; print(m.__file__)')" .
    FLAGOS_BACKEND=host FLAGOS_ALIAS_CUDA=0 TRANSFORMERS_TEST_DEVICE_SPEC=hf_device_spec.py \\
        python -m pytest tests/models/bert/test_modeling_bert.py

With the cuda alias on instead (FLAGOS_BACKEND set, no spec), the suite's
"cuda" already means flagos.
"""

import torch

import flagos_torchfl

if not flagos_torchfl.is_initialized():
    flagos_torchfl.initialize()

DEVICE_NAME = "flagos"
MANUAL_SEED_FN = torch.flagos.manual_seed
EMPTY_CACHE_FN = torch.flagos.empty_cache
DEVICE_COUNT_FN = torch.flagos.device_count
