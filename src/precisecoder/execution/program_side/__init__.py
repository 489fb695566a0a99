"""What runs beside the program in a split run's program process: `program_boot` (the fresh
interpreter's start) and `split_program` (the program's side of the bridge).

It imports only `shared` and this zone: the program's process loads these modules by file path
(`program_boot._BOOT`), never a package's `__init__`, and never holds the tests.
"""
