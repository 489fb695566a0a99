"""The policy a trainer starts from (train/policy.py), called directly: the byte tokenizer
that lets a random tiny model run the real path, and load_policy's random init (seeded, with
the config's execution options) and checkpoint load (its tokenizer's end and pad ids)."""

import numpy as np
from conftest import make_tiny_chat_checkpoint
from flax import nnx

from precisecoder.train import config as config_lib
from precisecoder.model import tokenizer as tokenizer_lib
from precisecoder.train.policy import ByteTokenizer, load_policy


def test_byte_tokenizer_round_trips_utf8_and_reserves_pad_and_end():
  tok = ByteTokenizer()
  ids = tok.encode("é\n")
  assert ids == [0xC3 + 2, 0xA9 + 2, ord("\n") + 2] and len(tok) == 258
  assert tok.decode([0] + ids + [1]) == "é\n"  # pad and end are not text
  chat = tok.apply_chat_template(
    [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
  )
  assert chat == "<user>\nhi\n<assistant>\n"


def test_load_policy_inits_from_the_preset_or_loads_the_checkpoint(tmp_path):
  cfg = config_lib.default("tiny")
  cfg.model.remat = "full"
  policy = load_policy(cfg)
  assert isinstance(policy.tokenizer, ByteTokenizer) and policy.source == tokenizer_lib.BYTES
  assert policy.config.remat == "full" and policy.eos_ids[-1] == 1 and policy.pad_id == 0
  same = load_policy(cfg)  # cfg.seed fixes the init
  a, b = (nnx.state(p.model, nnx.Param)["embed"].get_value() for p in (policy, same))
  np.testing.assert_array_equal(a, b)
  tokenizer = make_tiny_chat_checkpoint(tmp_path, "{{ messages[0]['content'] }}", ["x = 1"])
  cfg.model.checkpoint = str(tmp_path)
  loaded = load_policy(cfg)
  assert loaded.source == str(tmp_path) and loaded.config.num_layers == 1
  assert loaded.config.remat == "full" and loaded.eos_ids == [tokenizer.eos_token_id]
  assert loaded.pad_id == tokenizer.pad_token_id
