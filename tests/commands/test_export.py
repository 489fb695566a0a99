"""`precisecoder export` on a tiny checkpoint: the exported folder loads with the same logits
and tokenizer, and the command refuses an output that is its checkpoint or a file. Unloadable
checkpoints (shared with generate): tests/commands/test_generate.py."""

import numpy as np

from precisecoder import cli
from precisecoder.model import load_checkpoint
from tests.commands import test_generate
from tests.commands.test_generate import _one_line_error

checkpoint = test_generate.checkpoint  # the tiny checkpoint and its task file (a fixture)


def test_export_refuses_an_output_that_is_its_checkpoint_or_a_file(checkpoint, capsys):
  folder, tasks = checkpoint
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(folder)]) == 2
  assert "is the --checkpoint" in _one_line_error(capsys, "export")
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(tasks)]) == 2
  assert "exists and is not a folder" in _one_line_error(capsys, "export")


def test_export_then_load_gives_same_logits(checkpoint, tmp_path):
  folder, _ = checkpoint
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(tmp_path / "x")]) == 0
  a, tok_a, _ = load_checkpoint(folder)
  b, tok_b, _ = load_checkpoint(tmp_path / "x")
  tokens = np.asarray([tok_a.encode("def inc(x): return x")], np.int32)
  np.testing.assert_array_equal(np.asarray(a(tokens)), np.asarray(b(tokens)))
  assert tok_b.encode("def neg(x)") == tok_a.encode("def neg(x)")
