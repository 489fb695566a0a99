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


def scripted_conversation(conversation, prompt_ids, feedback_for):
  """Plays a `sampling.Conversation` to its end with `feedback_for(turn, row, answer) -> ids`
  ([] ends a row). Returns, per turn, (outputs, conversations): `conversations[row]` is the
  row's whole conversation before that turn's answer, or None once the row has ended."""
  out = conversation.first
  history = [list(prompt_ids[g]) for g in out.groups]
  alive = [True] * len(history)
  played = []
  for turn in range(conversation.turns):
    played.append((out, [list(h) if a else None for h, a in zip(history, alive)]))
    if turn == conversation.turns - 1:
      break
    replies = []
    for row, h in enumerate(history):
      answer = out.tokens[row, :out.lengths[row]].tolist()
      ids = list(feedback_for(turn, row, answer)) if alive[row] and answer else []
      alive[row] = bool(ids)
      h += answer + ids
      replies.append(ids)
    out = conversation.reply(replies)
  return played
