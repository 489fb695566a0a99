"""What runs beside the tests in a split run's test process: `split_tests`.

It imports `shared` and `program_side` (it starts the program's process and mirrors its state),
never the worker's or the parent's zone.
"""
