"""Batches: the scheduler (the lane, pools, barriers) and resume from a session log."""
