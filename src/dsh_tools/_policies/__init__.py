"""Policies a loop installs on a registry (timeouts, budgets, retries) and presenters."""
