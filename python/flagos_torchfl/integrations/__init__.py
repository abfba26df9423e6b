"""Integrations with training frameworks (docs/frameworks.md).

flagos_torchfl.integrations.lightning   accelerator="flagos" for Lightning
"""
