"""Fixtures of the CI tests (helpers live in ci_capture.py: conftest modules cannot be imported by name)."""

from ci_capture import tiny_capture  # noqa: F401
