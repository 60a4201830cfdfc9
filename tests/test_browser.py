"""The workbench in a real browser: JupyterLab on loopback, headless Chromium driven by Playwright.

The test starts JupyterLab from this environment on 127.0.0.1 (a free port, a token, a
throwaway root folder and throwaway Jupyter config, data, runtime and IPython folders; the
kernel spec and the ipywidgets lab extension still come from this environment's
share/jupyter), opens tests/browser/mapping_table.ipynb, runs all its cells from the Run menu,
and checks the `MappingTable` it displays: rows rendered, then a choice in the op_type filter
changes the rows and the count to exactly that op_type's nodes (and one in the status filter
to exactly the lifted nodes). The screenshot of the op_type choice is saved to
artifacts/workbench.png (gitignored) for a person to look at.

The browser is Debian's /usr/bin/chromium (.ci/run installs it); Playwright only drives it and
never downloads one of its own. Locally the test skips without it; in CI (CI=true) a missing
browser fails it.
"""

from __future__ import annotations

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
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

import ncet
from ncet.examples import load_example
from tests.browsers import chromium

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "tests" / "browser" / "mapping_table.ipynb"
EXAMPLE = "residual_cnn"  # what the notebook displays
ARTIFACTS = REPO / "artifacts"
SCREENSHOT = ARTIFACTS / "workbench.png"

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# Generous: two CPU cores shared with other jobs. JupyterLab takes 30-60 s to start there, and
# the first run also starts a kernel, imports torch and ncet and diagnoses the model.
SERVER_START_S = 240
PAGE_LOAD_MS = 180_000
RENDER_MS = 300_000
CHANGE_MS = 120_000

TABLE = ".ncet-mapping-table"
ROWS = f"{TABLE} table.ncet-mapping tbody tr"
OP_TYPE_SELECT = f"{TABLE} .ncet-filter-op-type select"
STATUS_SELECT = f"{TABLE} .ncet-filter-status select"

# What the page shows, read in one go: the header, the rows (data-node and cell texts), the
# count text and the op_type filter's options.
READ_TABLE = """() => {
  const root = document.querySelector('.ncet-mapping-table');
  const table = root.querySelector('table.ncet-mapping');
  return {
    head: [...table.querySelectorAll('thead th')].map(th => th.textContent.trim()),
    rows: [...table.querySelectorAll('tbody tr')].map(tr => ({
      node: tr.dataset.node,
      cells: [...tr.querySelectorAll('td')].map(td => td.textContent.trim()),
    })),
    count: root.querySelector('.ncet-count').textContent.trim(),
    options: [...root.querySelectorAll('.ncet-filter-op-type select option')]
      .map(o => o.textContent.trim()),
  };
}"""

# JupyterLab user settings, written to the throwaway config folder: never ask about news or
# updates (nothing fetched from outside), and start a notebook's kernel without a dialog.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        {"autoStartDefaultKernel": True},
}

# True once the count text differs from `before` and the table shows `rows` rows.
CHANGED = """([before, rows]) => {
  const root = document.querySelector('.ncet-mapping-table');
  return root.querySelector('.ncet-count').textContent.trim() !== before
    && root.querySelectorAll('table.ncet-mapping tbody tr').length === rows;
}"""


@dataclasses.dataclass(frozen=True)
class Lab:
    """A running JupyterLab: where it listens, its token, the notebook to open, its log."""

    url: str
    token: str
    notebook: str
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


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    """JupyterLab from this environment on loopback, serving a copy of the test notebook."""
    chromium()  # skip (or fail in CI) before paying for a server
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
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
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:  # CI runs as root
        command.append("--allow-root")
    server_lab = Lab(url=f"http://127.0.0.1:{port}", token=token, notebook=NOTEBOOK.name,
                     log=base / "jupyterlab.log")
    with server_lab.log.open("wb") as log:
        server = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(server_lab, server)
        yield server_lab
    finally:
        stop(server_lab, server)


def wait_for_kernel(lab: Lab, page: Page) -> None:
    """Wait until the notebook's kernel is up and idle, on the server and on the page."""
    deadline = time.monotonic() + PAGE_LOAD_MS / 1000
    while not any(s["path"] == lab.notebook and s["kernel"]["execution_state"] == "idle"
                  for s in api(lab, "sessions")):
        if time.monotonic() > deadline:
            pytest.fail(f"no idle kernel for {lab.notebook}:\n{tail(lab.log)}")
        time.sleep(0.5)
    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=PAGE_LOAD_MS)


def run_all_cells(lab: Lab, page: Page) -> None:
    """Run > Run All Cells, from JupyterLab's menu bar, once the kernel is idle."""
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=PAGE_LOAD_MS)
    wait_for_kernel(lab, page)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item:visible", has_text="Run All Cells").first.click()


def choose(page: Page, select: str, label: str, count_before: str, rows: int) -> dict:
    """Choose `label` in a filter, wait until the count text and the row count follow."""
    page.select_option(select, label=label)
    page.wait_for_function(CHANGED, arg=[count_before, rows], timeout=CHANGE_MS)
    return page.evaluate(READ_TABLE)


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install"):
        chromium("/nonexistent/chromium")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="apt-get install"):
        chromium("/nonexistent/chromium")


def test_the_mapping_table_filters_in_jupyterlab(lab):
    model, shapes = load_example(EXAMPLE)
    report = ncet.diagnose(model, *shapes)
    page_size = 25  # MappingTable's default
    assert len(report.rows) > page_size, "the example must need a second page"
    chosen = "Conv2d"
    expected = [r.fx_name for r in report.rows if r.op_type == chosen]
    assert 0 < len(expected) < page_size
    lifted = [r.fx_name for r in report.rows if r.status == "lifted"]
    assert 0 < len(lifted) < page_size

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS,
                                             headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        try:
            page.goto(f"{lab.url}/lab/tree/{lab.notebook}?token={lab.token}",
                      timeout=PAGE_LOAD_MS)
            run_all_cells(lab, page)
            page.wait_for_selector(ROWS, timeout=RENDER_MS)

            before = page.evaluate(READ_TABLE)
            assert [r["node"] for r in before["rows"]] == [
                r.fx_name for r in report.rows[:page_size]], "the first page, in graph order"
            op_column = before["head"].index("op_type")
            assert "all" in before["options"] and chosen in before["options"]
            assert str(len(report.rows)) in before["count"], before["count"]

            after = choose(page, OP_TYPE_SELECT, chosen, before["count"], len(expected))
            assert [r["node"] for r in after["rows"]] == expected
            assert {r["cells"][op_column] for r in after["rows"]} == {chosen}
            assert after["count"] != before["count"]
            assert str(len(expected)) in after["count"], after["count"]

            ARTIFACTS.mkdir(exist_ok=True)
            page.locator(TABLE).scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            print(f"screenshot: {SCREENSHOT}")

            # the other filter: every op_type again, then only the lifted nodes
            again = choose(page, OP_TYPE_SELECT, "all", after["count"], page_size)
            assert again["rows"] == before["rows"] and again["count"] == before["count"]
            status_column = before["head"].index("status")
            only = choose(page, STATUS_SELECT, "lifted", again["count"], len(lifted))
            assert [r["node"] for r in only["rows"]] == lifted
            assert {r["cells"][status_column] for r in only["rows"]} == {"lifted"}
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "workbench-failure.png"), full_page=True)
            print(f"JupyterLab log:\n{tail(lab.log)}")
            raise
        finally:
            browser.close()
    assert SCREENSHOT.stat().st_size > 10_000
