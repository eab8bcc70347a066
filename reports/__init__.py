"""Outputs: JSON contract, terminal summary, HTML report (view model → templates)."""
