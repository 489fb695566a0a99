"""What every zone of the execution pool loads: the pool, the worker, a run's test process and
its program's process. Standard library only, and nothing of the other zones.

`types` (the public contract: Job, Limits, Result, Status), `protocol` (framed JSON between the
pool and its workers), `programs` (a program compiled once, its identity), `codec` (data across
a split run's two processes) and `bridge` (their messages, references and what each side lends).
"""
