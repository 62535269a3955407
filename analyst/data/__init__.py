"""Package data of the analyst: the simulation study's recommended privacy settings."""
