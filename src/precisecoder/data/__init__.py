"""Task sets: PDB loaders, verified bug injection, built-in sets, TFDS builder, input pipeline.

Modules, one job each:
  mutation      AST mutation operators on PDB's editable lines (five PDB categories)
  injection     verification (fails the tests, multi-line atomic), composition, gt_diff check
  checking      program verdicts: the sandboxed pool, or in-process for our own templates
  families      function templates of the generator, dealt to disjoint splits
  generator     seeded easy/medium/hard tasks and clean programs
  humaneval     HumanEval single/multi/clean sets (seed 0 ships in builtin/)
  sources       tests from local BigCodeBench and LiveCodeBench copies
  pdb           PDB records joined with their tests; problems counted, not dropped
  verification  full re-verification of any task set
  cards         data cards (JSON and Markdown)
  tfds_builder  TFDS ArrayRecord builder for task files (no TensorFlow)
  pipeline      grain iterator with checkpointable state and per-host shards
"""
