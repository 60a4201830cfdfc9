"""NCET tests: spec tables checked against eager PyTorch."""
