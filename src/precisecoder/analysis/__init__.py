"""Reading runs: plots of training curves and the markdown report."""
