"""Fixtures of the commits tests (helpers live in commits_repo.py: conftest modules cannot be imported by name)."""

from commits_repo import kernel_repo, quiet_cpu  # noqa: F401
