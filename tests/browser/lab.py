"""JupyterLab on loopback for the browser tests: start and stop it, open a notebook in it and
run its cells, switch its theme.

The server runs from this environment on 127.0.0.1 (a free port, a token, a throwaway root
folder and throwaway Jupyter config, data, runtime and IPython folders; the kernel spec and
the lab extensions still come from this environment's share/jupyter). It exposes the app as
`window.jupyterapp` (`LabApp.expose_app_in_browser`), so a test can run JupyterLab commands
such as `apputils:change-theme` the way the menus do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

# Generous: two CPU cores shared with other jobs. JupyterLab takes 30-60 s to start there, and
# the first run also starts a kernel, imports torch and ncet and diagnoses the model.
SERVER_START_S = 240
PAGE_LOAD_MS = 180_000
RENDER_MS = 300_000
CHANGE_MS = 120_000

VIEWPORT = {"width": 1500, "height": 1100}

LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"

# JupyterLab user settings, written to the throwaway config folder: never ask about news or
# updates (nothing fetched from outside), and start a notebook's kernel without a dialog.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        {"autoStartDefaultKernel": True},
}

# True once JupyterLab shows `theme`: the body names it, and its stylesheet has been applied
# (the theme's --jp-layout-color0 is white for light and #111 for dark).
THEME_SHOWN = """([theme, light]) => {
  const body = document.body;
  const color = getComputedStyle(body).getPropertyValue('--jp-layout-color0').trim();
  const white = ['white', '#fff', '#ffffff'].includes(color.toLowerCase());
  return body.dataset.jpThemeName === theme && body.dataset.jpThemeLight === String(light)
    && color !== '' && white === light;
}"""


@dataclasses.dataclass(frozen=True)
class Lab:
    """A running JupyterLab: where it listens, its token, its log."""

    url: str
    token: str
    log: Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def api(lab: Lab, path: str):
    with urllib.request.urlopen(f"{lab.url}/api/{path}?token={lab.token}", timeout=10) as answer:
        return json.load(answer)


def wait_until_up(lab: Lab, server: subprocess.Popen) -> None:
    """Poll /api/status until the server answers; fail with its log if it exits or hangs."""
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode}:\n{tail(lab.log)}")
        try:
            api(lab, "status")
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within {SERVER_START_S} s:\n{tail(lab.log)}")


def stop(lab: Lab, server: subprocess.Popen) -> None:
    """Shut the kernels down, then the server (SIGTERM; SIGKILL to its group if it hangs)."""
    if server.poll() is None:
        try:  # kernels run in sessions of their own: ask the server to end them first
            for session in api(lab, "sessions"):
                request = urllib.request.Request(
                    f"{lab.url}/api/sessions/{session['id']}?token={lab.token}",
                    method="DELETE")
                urllib.request.urlopen(request, timeout=60).close()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # SIGTERM below still makes the server shut its kernels down
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


@contextlib.contextmanager
def running_lab(base: Path, notebooks: Sequence[Path]) -> Iterator[Lab]:
    """JupyterLab from this environment on loopback, serving copies of `notebooks`, with its
    folders under `base` (an empty folder)."""
    root = base / "root"
    root.mkdir()
    for notebook in notebooks:
        shutil.copy(notebook, root / notebook.name)
    for name, settings in LAB_SETTINGS.items():
        path = base / "config" / "lab" / "user-settings" / name
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(settings))
    env = {**os.environ,
           "JUPYTER_CONFIG_DIR": str(base / "config"),
           "JUPYTER_DATA_DIR": str(base / "data"),
           "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
           "IPYTHONDIR": str(base / "ipython"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    port, token = free_port(), secrets.token_hex(24)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}",
               # nothing fetched from outside: no news feed, no update check
               "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               # window.jupyterapp, to run commands (the theme) as the menus do
               "--LabApp.expose_app_in_browser=True"]
    if os.geteuid() == 0:  # CI runs as root
        command.append("--allow-root")
    lab = Lab(url=f"http://127.0.0.1:{port}", token=token, log=base / "jupyterlab.log")
    with lab.log.open("wb") as log:
        server = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(lab, server)
        yield lab
    finally:
        stop(lab, server)


def wait_for_kernel(lab: Lab, page: Page, notebook: str) -> None:
    """Wait until the notebook's kernel is up and idle, on the server and on the page."""
    deadline = time.monotonic() + PAGE_LOAD_MS / 1000
    while not any(s["path"] == notebook and s["kernel"]["execution_state"] == "idle"
                  for s in api(lab, "sessions")):
        if time.monotonic() > deadline:
            pytest.fail(f"no idle kernel for {notebook}:\n{tail(lab.log)}")
        time.sleep(0.5)
    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=PAGE_LOAD_MS)


def run_all_cells(lab: Lab, page: Page, notebook: str) -> None:
    """Run > Run All Cells, from JupyterLab's menu bar, once the kernel is idle."""
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=PAGE_LOAD_MS)
    wait_for_kernel(lab, page, notebook)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item:visible", has_text="Run All Cells").first.click()


def open_notebook(lab: Lab, browser: Browser, notebook: str) -> Page:
    """A new page showing `notebook` in JupyterLab, its cells started (Run All Cells)."""
    page = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
    page.goto(f"{lab.url}/lab/tree/{notebook}?token={lab.token}", timeout=PAGE_LOAD_MS)
    run_all_cells(lab, page, notebook)
    return page


def set_theme(page: Page, theme: str) -> None:
    """Switch JupyterLab to `theme` (LIGHT or DARK) with the command the Settings > Theme
    menu runs, and wait until the page shows it."""
    page.evaluate("theme => window.jupyterapp.commands.execute('apputils:change-theme', "
                  "{theme})", theme)
    page.wait_for_function(THEME_SHOWN, arg=[theme, theme == LIGHT], timeout=CHANGE_MS)
