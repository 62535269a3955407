"""Placeholder for the site_node package (filled by its issue)."""
