"""The notebooks here are opened in JupyterLab by tests/test_browser.py, not run by nbval;
lab.py (the JupyterLab server and its pages) and probes.py (what is read off the page) are
that test's helpers."""

collect_ignore_glob = ["*.ipynb"]
