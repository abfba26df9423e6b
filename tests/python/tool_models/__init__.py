"""Small models and a CLI runner for the migration-tool tests (test_tools_*.py)."""
