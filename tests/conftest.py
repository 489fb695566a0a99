"""Suite-wide settings: offline, CPU only, and a persistent JAX compilation cache."""

import os
import pathlib

_ROOT = pathlib.Path(__file__).resolve().parents[1]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# Compiles dominate a CPU test run; a cache shared across test processes and runs cuts them.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_ROOT / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")
# Generated task sets and built base models (train/tasksets.py, train/base_model.py).
os.environ.setdefault("PRECISECODER_CACHE", str(_ROOT / ".cache"))



def make_chat_tokenizer(chat_template, corpus):
  """A byte-level BPE trained on `corpus` here (no download) with ChatML's special tokens."""
  import transformers  # pylint: disable=import-outside-toplevel
  from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # pylint: disable=import-outside-toplevel

  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
      vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
  tok.train_from_iterator(list(corpus) * 20, trainer)
  return transformers.PreTrainedTokenizerFast(
      tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
      chat_template=chat_template)


def make_tiny_chat_checkpoint(folder, chat_template, corpus):
  """A 1-layer random Llama folder with `make_chat_tokenizer`'s tokenizer: the real
  generate/evaluate path in seconds. Returns the tokenizer."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel

  tokenizer = make_chat_tokenizer(chat_template, corpus)
  config = transformers.LlamaConfig(
      vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
      tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
      pad_token_id=tokenizer.pad_token_id)
  torch.manual_seed(0)
  transformers.LlamaForCausalLM(config).save_pretrained(folder)
  tokenizer.save_pretrained(folder)
  return tokenizer


def read_only_folder(tmp_path):
  """A folder this process cannot write into: one made read-only, or /proc when running as
  root (permission bits do not stop root; /proc takes no new files from anyone)."""
  if os.geteuid() == 0:
    return pathlib.Path("/proc")
  folder = tmp_path / "read-only"
  folder.mkdir()
  folder.chmod(0o555)
  return folder
