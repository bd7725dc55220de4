"""Modules that ``module:attribute`` references in registry tests point at."""
