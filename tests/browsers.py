"""Finding Debian's headless Chromium for the tests that render in a real browser."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"
"""Where Debian's `chromium` package puts the browser (.ci/run installs it)."""


def chromium(path: str | None = None) -> str:
    """The browser's path; skips the calling test locally without one, fails it in CI."""
    path = CHROMIUM if path is None else path
    found = path if os.access(path, os.X_OK) else shutil.which("chromium")
    if found:
        return found
    message = ("headless Chromium is not installed: apt-get install -y "
               "--no-install-recommends chromium fonts-dejavu-core")
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
