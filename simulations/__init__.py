"""Placeholder for the simulations package (filled by its issue)."""
