"""Jupyter views of NCET's conversion and exactness results (installed as `ncet.widgets`)."""
