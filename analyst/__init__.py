"""Placeholder for the analyst package (filled by its issue)."""
