"""Worker processes: children started with torch imported already (the preloaded helper)."""

from harness.workers._preload import PreloadedPopen, forkable, preloaded_popen, prestart

__all__ = ["PreloadedPopen", "forkable", "preloaded_popen", "prestart"]
