"""Decode throughput: our JAX sampler vs transformers' `generate` (PyTorch, KV cache on).

Both sides get the same weights, prompts and sampling settings (temperature 1, no EOS, so
every row decodes exactly `new_tokens`). Ours is timed after a warm-up call (compilation is
reported separately; the persistent cache removes it across runs).

  python benchmarks/bench_sampler.py                  # tiny Qwen3: batch 32, prompt 128, 128 new
  python benchmarks/bench_sampler.py --smollm2        # also SmolLM2-135M (GGUF) at batch 8
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import torch
import transformers

from precisecoder.model import bundled_smollm2_gguf, load_checkpoint, load_hf, presets
from precisecoder.sampling import sample


def _ours(model, prompts, new_tokens):
  kwargs = dict(num_samples=1, max_new_tokens=new_tokens, temperature=1.0, eos_ids=(), pad_id=0)
  calls = iter(range(1_000_000))

  def run():
    out = sample(model, prompts, seed=next(calls), **kwargs)
    assert (out.lengths == new_tokens).all()

  return run


def _torch(model, prompts, new_tokens):
  model.generation_config.eos_token_id = None
  ids = torch.tensor(prompts, dtype=torch.long)
  kwargs = dict(attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                min_new_tokens=new_tokens, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                use_cache=True, pad_token_id=0)

  def run():
    with torch.inference_mode():
      out = model.generate(ids, **kwargs)
    assert out.shape[1] == ids.shape[1] + new_tokens

  return run


def _timed(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def _compare(name, ours, theirs, tokens, repeats):
  """Warm-up, then alternate the two so that load from other processes hits both alike."""
  compile_s = _timed(ours)
  _timed(theirs)
  ours_s, theirs_s = [], []
  for _ in range(repeats):
    ours_s.append(_timed(ours))
    theirs_s.append(_timed(theirs))
  best_ours, best_theirs = tokens / min(ours_s), tokens / min(theirs_s)
  med_ours, med_theirs = tokens / np.median(ours_s), tokens / np.median(theirs_s)
  print(f"{name}\n  ours         best {best_ours:8.1f} tok/s  median {med_ours:8.1f} tok/s  "
        f"(first call incl. compile {compile_s:.1f}s)\n"
        f"  transformers best {best_theirs:8.1f} tok/s  median {med_theirs:8.1f} tok/s\n"
        f"  ratio ours/transformers: best {best_ours / best_theirs:.2f}x, "
        f"median {med_ours / med_theirs:.2f}x", flush=True)


def tiny_qwen3(batch, prompt_len, new_tokens, repeats):
  config = presets.get("tiny")
  hf_config = transformers.Qwen3Config(**{k: v for k, v in config.to_hf().items()
                                          if k not in ("architectures", "model_type")})
  torch.manual_seed(0)
  reference = transformers.Qwen3ForCausalLM(hf_config).eval()
  with tempfile.TemporaryDirectory() as folder:
    reference.save_pretrained(folder)
    ours, _ = load_hf(folder)
  rng = np.random.default_rng(0)
  prompts = rng.integers(2, config.vocab_size, (batch, prompt_len)).tolist()
  _compare(f"tiny Qwen3 ({config.num_params() / 1e6:.1f}M params), batch {batch}, prompt "
           f"{prompt_len}, {new_tokens} new tokens", _ours(ours, prompts, new_tokens),
           _torch(reference, prompts, new_tokens), batch * new_tokens, repeats)


def smollm2(batch, prompt_len, new_tokens, repeats):
  from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

  path = bundled_smollm2_gguf()
  ours, _, config = load_checkpoint(path, with_tokenizer=False)
  hf_config = transformers.AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
  reference = transformers.LlamaForCausalLM(hf_config)
  tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=reference)["tensors"]
  reference.load_state_dict(tensors, strict=False)
  reference.tie_weights()
  reference.eval()
  rng = np.random.default_rng(0)
  prompts = rng.integers(3, config.vocab_size, (batch, prompt_len)).tolist()
  _compare(f"SmolLM2-135M-Instruct, batch {batch}, prompt {prompt_len}, {new_tokens} new tokens",
           _ours(ours, prompts, new_tokens), _torch(reference, prompts, new_tokens),
           batch * new_tokens, repeats)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--prompt", type=int, default=128)
  parser.add_argument("--new-tokens", type=int, default=128)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--smollm2", action="store_true", help="also SmolLM2-135M at batch 8")
  parser.add_argument("--smollm2-only", action="store_true")
  parser.add_argument("--threads", type=int, default=os.cpu_count())
  args = parser.parse_args()
  torch.set_num_threads(args.threads)
  print(f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
  if not args.smollm2_only:
    tiny_qwen3(args.batch, args.prompt, args.new_tokens, args.repeats)
  if args.smollm2 or args.smollm2_only:
    smollm2(8, args.prompt, args.new_tokens, args.repeats)


if __name__ == "__main__":
  main()
