"""The `precisecoder base` command: its one-line refusals, and (slow) a whole tiny base that it
builds, measures, caches and that transformers loads."""

import json

import pytest

from precisecoder.commands import base as base_command
from precisecoder.experiments import base_model
from precisecoder.train import config as config_lib


@pytest.mark.parametrize(
  "argv,message",
  [
    (["--preset", "nope"], "unknown base preset 'nope'"),
    (["--preset", "tiny", "--config.sft.nope=1"], "nope"),
  ],
)
def test_the_command_refuses_in_one_line(argv, message, capsys):
  assert base_command.main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("precisecoder base: error:") and message in err and "\n" not in err


@pytest.mark.slow
def test_a_tiny_base_builds_measures_and_loads(monkeypatch, tmp_path, capsys):
  import transformers  # pylint: disable=import-outside-toplevel

  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  assert base_command.main(["--preset", "tiny"]) == 0
  cfg = config_lib.base_config("tiny")
  result = json.loads((base_model.folder(cfg) / "base.json").read_text())
  assert result["corpus_tasks"] == 32 and result["vocab"] <= 512
  assert set(result["targets"]) == {"reference", "extra_edits", "wrong_edit", "noop"}
  assert result["validation"]["num_buggy"] == 4 and result["groups"]["num_groups"] == 2
  # New instances of the training families, none in the SFT corpus, and correct programs.
  assert result["heldin"]["num_buggy"] == 4 and result["heldin"]["num_clean"] == 2
  assert result["heldin"]["reference_edit_lines"] >= 1
  out = capsys.readouterr().out
  assert "greedy, validation" in out and str(base_model.folder(cfg) / "model") in out
  assert "greedy, heldin (4 new instances of the training families)" in out
  assert "; 2 correct programs of them: no-op" in out
  model = transformers.AutoModelForCausalLM.from_pretrained(base_model.folder(cfg) / "model")
  assert model.config.vocab_size >= result["vocab"]
  # Cached: a second call prints the same measurements without building.
  assert base_command.main(["--preset", "tiny"]) == 0
  assert "greedy, validation" in capsys.readouterr().out
  # A run whose model.checkpoint is "base" starts from that folder, and its held-in split
  # leaves out the tasks of the base's SFT corpus; any other checkpoint stands for itself.
  checkpoint, seen = base_model.resolve(config_lib.default("tiny-base"))
  assert checkpoint == str(base_model.folder(cfg) / "model")
  assert len(seen) == result["corpus_tasks"]
  assert base_model.resolve(config_lib.default("tiny")) == (None, [])
