"""The sandbox's own code: `worker` (a warm interpreter in its namespaces that forks one child
per run), `sandbox` (namespaces, private root, uid drop, rlimits) and `harness` (the code
around the program in each child; a split run's test process starts there).

It imports the zones below it (`shared`, `program_side`, `test_side`), never the parent's: what
it loads runs under a task set's own interpreter, standard library only.
"""
