"""The notebooks here are opened in JupyterLab by tests/test_browser.py, not run by nbval."""

collect_ignore_glob = ["*.ipynb"]
