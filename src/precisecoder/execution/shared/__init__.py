"""What the zones of the execution pool share, any of whose processes may load it: the pool, the
worker, a run's test process and its program's process. Standard library only, and nothing of
the other zones.

`types` (the public contract: Job, Limits, Result, Status), `protocol` (framed JSON between the
pool and its workers), `programs` (a program compiled once, its identity), `codec` (data across
a split run's two processes) and `bridge` (their messages, references and what each side lends).
"""
