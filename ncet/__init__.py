"""NCET: trace a PyTorch model into canonical GraphIR and prove the translation exact."""
