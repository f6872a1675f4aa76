"""Fixtures of the multi-GPU tests (helpers live in multigpu_helpers.py: conftest modules cannot be imported by name)."""

from multigpu_helpers import worker_env_for_tests  # noqa: F401  (a fixture: pytest finds it here)
