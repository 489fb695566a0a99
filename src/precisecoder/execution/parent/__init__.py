"""What judges in the pool's process, where no program runs: `pool` (batches, workers,
deadlines), `verdicts` (the verdict on a run's records), `expectations` (what the test code shows
the sandbox and what the pool keeps) and `specs` (test specs).

Top zone: it may import every other zone; no other zone imports it, so no sandboxed process
loads it.
"""
