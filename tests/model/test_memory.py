"""The memory estimates are lower bounds of what is really allocated: the KV cache byte for
byte, and a whole sampler call below what XLA compiles it to."""

import jax
import numpy as np
import pytest
from flax import nnx

from precisecoder import sampling
from precisecoder.model import architectures, memory
from precisecoder.model.decoder import Decoder, KVCache


def test_kv_cache_bytes_are_the_cache_the_decoder_allocates():
  for dtype in ("float32", "bfloat16"):
    config = architectures.get("tiny", dtype=dtype)
    cache = KVCache.zeros(config, 3, 40)
    allocated = sum(x.nbytes for x in (*cache.k, *cache.v))
    assert memory.kv_cache_bytes(config, 3, 40) == allocated


def test_a_sampler_call_needs_at_least_the_estimate():
  """The compiled sampler (arguments + temporaries + outputs) holds more than the estimate."""
  config = architectures.get("tiny", num_layers=2)
  model = Decoder(config, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  prompts, samples, prompt_len, new = 2, 8, 64, 32
  prompt = np.ones((prompts, prompt_len), np.int32)
  compiled = sampling._generate.lower(  # pylint: disable=protected-access
    graphdef,
    state,
    prompt,
    prompt.astype(bool),
    np.arange(prompts, dtype=np.int32),
    jax.random.key(0),
    num_samples=samples,
    max_new_tokens=new,
    temperature=1.0,
    top_p=1.0,
    top_k=0,
    eos_ids=(1,),
    pad_id=0,
    segments=1,
  ).compile()
  analysis = compiled.memory_analysis()
  allocated = (
    analysis.argument_size_in_bytes + analysis.temp_size_in_bytes + analysis.output_size_in_bytes
  )
  estimate = sum(
    memory.sampler_bytes(
      config, prompts=prompts, samples=samples, prompt_len=prompt_len, max_new_tokens=new
    ).values()
  )
  assert 0 < estimate <= allocated, (estimate, allocated)


def test_check_names_every_part_and_what_to_lower():
  need = {"weights": 2 * 10**9, "KV cache": 30 * 10**9}
  memory.check(need, "x", "lower it", available=(33 * 10**9, "test memory"))
  with pytest.raises(memory.BatchTooLarge) as refused:
    memory.check(
      need, "sampling 8 prompts", "lower --samples", available=(20 * 10**9, "test memory")
    )
  assert str(refused.value) == (
    "sampling 8 prompts needs at least 32.0 GB (weights 2.0 GB, KV "
    "cache 30.0 GB); this machine has 20.0 GB of test memory (lower "
    "--samples)"
  )
  have, where = memory.available_bytes()
  assert have > 0 and where == "available host memory"  # CPU in the tests
