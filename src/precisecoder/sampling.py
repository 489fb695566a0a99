"""Batched sampling with a KV cache: one prefill, then a jitted `while_loop` of one-token steps.

Shapes are static: prompts are left-padded to a bucketed length and the cache holds
prompt + `max_new_tokens` slots, so a run recompiles only for a new bucket, batch size or
sampling setting (and the persistent compilation cache makes even that cheap across runs).
Each prompt is prefilled once and its cache repeated for its `num_samples` rows. The loop
stops as soon as every row has produced an end-of-sequence token.

Behaviour log-probs are those of the sampled token under the temperature-scaled model
distribution, log softmax(logits / T) (log softmax(logits) when greedy), before top-k/top-p
truncation: exactly what a learner recomputes from the same policy at the same temperature.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from precisecoder import multihost
from precisecoder.model.decoder import CACHE_AXES, Decoder, KVCache, positions_from_mask
from precisecoder.model.sharding import constrain, logical_to_spec, mesh_scope
from precisecoder.intmath import cdiv, round_up

_MASKED = -1e30
PROMPT_BUCKET = 64  # prompts are left-padded to a multiple of this many tokens (at least one)


@dataclasses.dataclass(frozen=True)
class SampleOutput:
  """Rows are prompt-major: row = prompt_index * num_samples + k."""

  prompt_ids: np.ndarray  # int32 [N, P], left-padded with pad_id
  prompt_mask: np.ndarray  # bool [N, P], True on real prompt tokens
  tokens: np.ndarray  # int32 [N, T], pad_id after the end
  logprobs: np.ndarray  # float32 [N, T], behaviour log-probs, 0 after the end
  lengths: np.ndarray  # int32 [N], generated tokens including the end-of-sequence token
  groups: np.ndarray  # int32 [N], index of the prompt each row answers

  @property
  def completion_mask(self) -> np.ndarray:
    return completion_mask(self.lengths, self.tokens.shape[1])

  def completion_ids(
    self, row: int, *, keep_eos: bool = False, eos_ids: Sequence[int] = ()
  ) -> list[int]:
    ids = self.tokens[row, : self.lengths[row]].tolist()
    if not keep_eos and ids and ids[-1] in eos_ids:
      ids = ids[:-1]
    return ids


def enable_compilation_cache(path: str | os.PathLike | None = None) -> pathlib.Path:
  """Persists compiled programs across runs (default ~/.cache/precisecoder/jax)."""
  path = pathlib.Path(
    path
    or os.environ.get("JAX_COMPILATION_CACHE_DIR")
    or pathlib.Path.home() / ".cache" / "precisecoder" / "jax"
  )
  path.mkdir(parents=True, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", str(path))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  return path


def bucket_length(n: int, multiple: int = 64) -> int:
  """`n` rounded up to a multiple (at least one): padded lengths compile once per bucket."""
  return max(multiple, round_up(n, multiple))


# Padding and masks, shared by the sampler and the trainers' batches (train/rollout.py,
# train/sequences.py): prompts are left-padded, completions right-padded.
def pad_rows(
  rows: Sequence[Sequence[int]], length: int, pad_id: int, *, left: bool
) -> tuple[np.ndarray, np.ndarray]:
  """Token rows of up to `length` ids as int32 [N, length] padded with `pad_id` on the left
  (prompts) or right (answers), and the bool mask of the real tokens."""
  tokens = np.full((len(rows), length), pad_id, np.int32)
  mask = np.zeros((len(rows), length), bool)
  for row, ids in enumerate(rows):
    if len(ids):
      cols = slice(length - len(ids), length) if left else slice(0, len(ids))
      tokens[row, cols] = ids
      mask[row, cols] = True
  return tokens, mask


def pad_to(x: np.ndarray, width: int, value, *, left: bool) -> np.ndarray:
  """`x` [N, W] widened to `width` columns of `value` on the left or right (no-op if wide)."""
  extra = width - x.shape[1]
  if extra <= 0:
    return x
  pad = ((0, 0), (extra, 0)) if left else ((0, 0), (0, extra))
  return np.pad(x, pad, constant_values=value)


def completion_mask(lengths: np.ndarray, width: int) -> np.ndarray:
  """bool [N, width]: True on each row's first `lengths[row]` (generated) tokens."""
  return np.arange(width)[None, :] < np.asarray(lengths)[:, None]


def choose_tokens(
  logits: jax.Array, key: jax.Array, *, temperature: float, top_p: float, top_k: int
) -> tuple[jax.Array, jax.Array]:
  """Samples one token per row of float32 logits [N, V] with `key` (one, or one per row [N]);
  returns (tokens, behaviour log-probs)."""
  if temperature == 0.0:
    tokens = jnp.argmax(logits, axis=-1)
    logp = jax.nn.log_softmax(logits, axis=-1)
  else:
    scaled = logits / temperature
    logp = jax.nn.log_softmax(scaled, axis=-1)
    if 0 < top_k < logits.shape[-1]:
      kth = jax.lax.top_k(scaled, top_k)[0][:, -1:]
      scaled = jnp.where(scaled < kth, _MASKED, scaled)
    if top_p < 1.0:
      ordered = jnp.flip(jnp.sort(scaled, axis=-1), axis=-1)
      probs = jax.nn.softmax(ordered, axis=-1)
      before = jnp.cumsum(probs, axis=-1) - probs  # mass of strictly more likely tokens
      threshold = jnp.min(jnp.where(before < top_p, ordered, jnp.inf), axis=-1, keepdims=True)
      scaled = jnp.where(scaled < threshold, _MASKED, scaled)
    # Inverse-CDF sampling: one uniform per row instead of one Gumbel draw per vocabulary
    # entry (random bits dominate a CPU decode step otherwise). Masked entries have zero
    # mass and u > 0, so they are never chosen.
    cdf = jnp.cumsum(jax.nn.softmax(scaled, axis=-1), axis=-1)
    if key.ndim:  # a key per row: draws that do not depend on where a row sits in the batch
      u = jax.vmap(lambda k: jax.random.uniform(k, (1,)))(key)
    else:
      u = jax.random.uniform(key, (logits.shape[0], 1))
    u = (1.0 - u) * cdf[:, -1:]
    tokens = jnp.minimum(jnp.sum(cdf < u, axis=-1), logits.shape[-1] - 1)
  tokens = tokens.astype(jnp.int32)
  return tokens, jnp.take_along_axis(logp, tokens[:, None], axis=-1)[:, 0]


def _constrain_cache(cache: KVCache) -> KVCache:
  return KVCache(
    k=tuple(constrain(k, CACHE_AXES) for k in cache.k),
    v=tuple(constrain(v, CACHE_AXES) for v in cache.v),
    valid=constrain(cache.valid, ("batch", "cache_seq")),
  )


_DECODE_STATICS = (
  "max_new_tokens",
  "temperature",
  "top_p",
  "top_k",
  "eos_ids",
  "pad_id",
  "segments",
)


def _prefill(
  model: Decoder, layer_params, prompt, prompt_mask, *, num_samples: int, cache_len: int
):
  """Prefills each prompt once into a cache of `cache_len` slots and repeats it for its
  `num_samples` rows; returns (cache, last logits, next position) per row."""
  num_prompts, prompt_len = prompt.shape
  cache = _constrain_cache(KVCache.zeros(model.config, num_prompts, cache_len))
  logits, cache = model.forward_cached(
    prompt,
    positions_from_mask(prompt_mask),
    prompt_mask,
    cache,
    jnp.int32(0),
    layer_params,
    window=prompt_len,
    last_logits_only=True,
  )

  def repeat(x, axis):  # prompt-major rows: each prompt's copies are adjacent
    return jnp.repeat(x, num_samples, axis=axis, total_repeat_length=x.shape[axis] * num_samples)

  cache = _constrain_cache(
    KVCache(
      k=tuple(repeat(k, 0) for k in cache.k),
      v=tuple(repeat(v, 0) for v in cache.v),
      valid=repeat(cache.valid, 0),
    )
  )
  last = constrain(repeat(logits[:, -1], 0), ("batch", "vocab"))
  position = repeat(jnp.sum(prompt_mask, axis=-1, dtype=jnp.int32), 0)
  return cache, last, position


def _row_keys(key, prompt_index, num_samples: int):
  """Row r draws from key(prompt_index, sample): the same numbers wherever the row sits (any
  mesh, any number of hosts, padding rows or not)."""
  num_prompts = prompt_index.shape[0]
  row_ids = jnp.repeat(
    prompt_index, num_samples, total_repeat_length=num_prompts * num_samples
  ) * num_samples + jnp.tile(jnp.arange(num_samples, dtype=jnp.int32), num_prompts)
  return jax.vmap(lambda r: jax.random.fold_in(key, r))(row_ids)


def _decode(
  model: Decoder,
  layer_params,
  cache: KVCache,
  last,
  position,
  done,
  row_keys,
  *,
  start,
  max_new_tokens,
  temperature,
  top_p,
  top_k,
  eos_ids,
  pad_id,
  segments,
  window: int | None = None,
):
  """Up to `max_new_tokens` one-token steps written at cache slots start, start + 1, ...;
  rows already `done` stay masked. Returns the loop's final state. Attention reads the cache
  up to where each segment can have filled it, or up to `window` (a traced `start`)."""
  n = last.shape[0]
  eos = jnp.asarray(eos_ids, jnp.int32)
  state0 = dict(
    step=jnp.int32(0),
    last=last,
    cache=cache,
    position=position,
    done=done,
    lengths=jnp.zeros((n,), jnp.int32),
    tokens=jnp.full((n, max_new_tokens), pad_id, jnp.int32),
    logprobs=jnp.zeros((n, max_new_tokens), jnp.float32),
  )

  def body(s, window):
    step, done = s["step"], s["done"]
    step_keys = jax.vmap(lambda k: jax.random.fold_in(k, step))(row_keys)
    token, logprob = choose_tokens(
      s["last"], step_keys, temperature=temperature, top_p=top_p, top_k=top_k
    )
    token = jnp.where(done, pad_id, token)
    logprob = jnp.where(done, 0.0, logprob)
    live = ~done
    tokens = jax.lax.dynamic_update_slice(s["tokens"], token[:, None], (0, step))
    logprobs = jax.lax.dynamic_update_slice(s["logprobs"], logprob[:, None], (0, step))
    logits, cache = model.forward_cached(
      token[:, None],
      s["position"][:, None],
      live[:, None],
      s["cache"],
      start + step,
      layer_params,
      window=window,
    )
    return dict(
      step=step + 1,
      last=constrain(logits[:, 0], ("batch", "vocab")),
      cache=_constrain_cache(cache),
      position=s["position"] + live.astype(jnp.int32),
      done=done | (live & jnp.isin(token, eos)),
      lengths=s["lengths"] + live.astype(jnp.int32),
      tokens=tokens,
      logprobs=logprobs,
    )

  # Decode in segments, each reading the cache only up to where that segment can have filled
  # it: the attention reads about half the cache on average instead of all of it.
  final = state0
  for end in segment_ends(max_new_tokens, segments):
    final = jax.lax.while_loop(
      lambda s, end=end: (s["step"] < end) & ~jnp.all(s["done"]),
      functools.partial(body, window=window or start + end),
      final,
    )
  return final


@functools.partial(jax.jit, static_argnames=("graphdef", "num_samples", *_DECODE_STATICS))
def _generate(graphdef, state, prompt, prompt_mask, prompt_index, key, *, num_samples, **decoding):
  model: Decoder = nnx.merge(graphdef, state)
  prompt_len = prompt.shape[1]
  layer_params = model.layer_params()  # sliced once, outside the decode loop
  cache, last, position = _prefill(
    model,
    layer_params,
    prompt,
    prompt_mask,
    num_samples=num_samples,
    cache_len=prompt_len + decoding["max_new_tokens"],
  )
  done = jnp.zeros((last.shape[0],), bool)
  final = _decode(
    model,
    layer_params,
    cache,
    last,
    position,
    done,
    _row_keys(key, prompt_index, num_samples),
    start=prompt_len,
    **decoding,
  )
  return final["tokens"], final["logprobs"], final["lengths"]


def segment_ends(max_new_tokens: int, segments: int) -> list[int]:
  """Step counts at which decode segments end: equal parts, rounded up to 16 tokens."""
  size = cdiv(max_new_tokens, max(1, segments))
  size = round_up(size, 16)
  return sorted({min(max_new_tokens, end) for end in range(size, max_new_tokens + size, size)})


def _check(
  model: Decoder, prompt_ids, num_samples, max_new_tokens, temperature, top_p, top_k, budget: int
) -> int:
  """Raises ValueError for arguments that cannot work; returns the longest prompt."""
  if not prompt_ids:
    raise ValueError("sample: no prompts")
  for i, ids in enumerate(prompt_ids):
    if not len(ids):
      raise ValueError(f"sample: prompt {i} is empty")
  if num_samples < 1 or max_new_tokens < 1:
    raise ValueError(
      f"sample: num_samples={num_samples} and max_new_tokens={max_new_tokens} must be positive"
    )
  if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
    raise ValueError(f"sample: bad temperature={temperature}, top_p={top_p} or top_k={top_k}")
  longest = max(len(ids) for ids in prompt_ids)
  limit = model.config.max_position_embeddings
  if longest + budget > limit:
    what = (
      f"max_new_tokens ({max_new_tokens})"
      if budget == max_new_tokens
      else f"the conversation's {budget} further tokens"
    )
    raise ValueError(f"sample: prompt ({longest}) + {what} exceeds the model's {limit} positions")
  return longest


@dataclasses.dataclass(frozen=True)
class HostRows:
  """Where one host's prompts sit in a global batch that each host samples on devices of its
  own (a sampler mesh per host: no collective while sampling): the global index of its first
  prompt (which seeds its rows) and the longest prompt of every host's (the padded width, so
  that every host's rows have the shapes, and the numbers, of one global batch)."""

  first: int
  longest: int


def agree_rows(lengths: Sequence[Sequence[int]]) -> list[HostRows]:
  """Each batch's HostRows, from this host's prompt lengths in each of `lengths` (the prompts
  of several batches, sampled one after the other): one collective for all of them, so every
  host calls it in the same order as its others (on one process: no collective)."""
  counts = np.array([[len(x), max(x, default=0)] for x in lengths], np.int64).reshape(-1, 2)
  every = multihost.allgather_rows(counts[None])  # [hosts, batches, 2]
  first = np.sum(every[: jax.process_index(), :, 0], axis=0)
  longest = np.max(every[:, :, 1], axis=0)
  return [HostRows(int(f), int(m)) for f, m in zip(first, longest)]


def _prompt_batch(
  prompt_ids,
  longest: int,
  mesh: Mesh | None,
  prompt_bucket: int,
  pad_id: int,
  host_rows: HostRows | None = None,
):
  """(prompt, mask, global prompt index, padding prompts added): this host's prompts
  left-padded to a length every host agrees on, padded with copies to fill whole devices.
  `host_rows`: that length and the prompts' global place, agreed beforehand (agree_rows) for
  a mesh of this host's own devices."""
  # Across hosts every process holds its own prompts; the padded length must agree.
  multi = multihost.spans_processes(mesh)
  if host_rows is not None:
    if multi or longest > host_rows.longest:
      raise ValueError(
        f"sample: host_rows {host_rows} is for a mesh of this host's devices and prompts of "
        f"at most {host_rows.longest} tokens (the mesh spans hosts: {multi}; longest: {longest})"
      )
    longest = host_rows.longest
  elif multi:
    longest = multihost.global_max(longest)
  prompt_len = bucket_length(longest, prompt_bucket)
  prompt, mask = pad_rows(prompt_ids, prompt_len, pad_id, left=True)
  # A prompt's index in the global batch (hosts' prompts in process order) seeds its rows.
  if host_rows is not None:
    first = host_rows.first
  else:
    first = multihost.rows_before(len(prompt_ids)) if multi else 0
  index = np.arange(first, first + len(prompt_ids), dtype=np.int32)
  # Each host's block must fill whole devices; rows added for that are dropped again below.
  extra = (-len(prompt_ids)) % multihost.rows_per_host_multiple(mesh) if multi else 0
  if extra:
    prompt = np.concatenate([prompt, np.repeat(prompt[:1], extra, axis=0)])
    mask = np.concatenate([mask, np.repeat(mask[:1], extra, axis=0)])
    index = np.concatenate([index, np.full(extra, -1, np.int32)])
  return prompt, mask, index, extra


def _to_mesh(arrays, mesh: Mesh | None):
  """Host arrays whose first axis is the batch, as device arrays: one global batch of every
  host's rows across processes, batch-sharded on a one-process mesh."""
  if mesh is None:
    return arrays
  if multihost.spans_processes(mesh):
    return multihost.global_batch(arrays, mesh)
  return tuple(
    jax.device_put(
      x, NamedSharding(mesh, logical_to_spec(("batch",) + (None,) * (x.ndim - 1), x.shape, mesh))
    )
    for x in arrays
  )


def _local(outputs, mesh: Mesh | None, rows: int) -> list[np.ndarray]:
  """This host's first `rows` rows of each batch-sharded output."""
  if multihost.spans_processes(mesh):  # each host reads back the rows of its own prompts
    outputs = [jax.device_put(x, multihost.batch_sharding(mesh, x.shape)) for x in outputs]
  return [multihost.local_rows(x)[:rows] for x in outputs]


def _statics(
  num_samples, max_new_tokens, temperature, top_p, top_k, eos_ids, pad_id, decode_segments
) -> dict:
  return dict(
    num_samples=int(num_samples),
    max_new_tokens=int(max_new_tokens),
    temperature=float(temperature),
    top_p=float(top_p),
    top_k=int(top_k),
    eos_ids=tuple(int(e) for e in eos_ids),
    pad_id=int(pad_id),
    segments=int(decode_segments),
  )


def sample(
  model: Decoder,
  prompt_ids: Sequence[Sequence[int]],
  *,
  num_samples: int = 1,
  max_new_tokens: int,
  temperature: float = 1.0,
  top_p: float = 1.0,
  top_k: int = 0,
  eos_ids: Sequence[int],
  pad_id: int,
  seed: int = 0,
  mesh: Mesh | None = None,
  prompt_bucket: int = PROMPT_BUCKET,
  decode_segments: int = 1,
  host_rows: HostRows | None = None,
) -> SampleOutput:
  """Samples `num_samples` completions per prompt; deterministic for a seed (and any mesh).

  On a mesh that spans several processes, every process passes its own prompts (the same
  number on each) and gets back the rows of those prompts; together they are one global
  batch, host-major, sampled as one process holding all of them would sample it. With
  `host_rows` (agree_rows'), each host samples its prompts of such a batch on a mesh of its
  own devices, with the same seeds and padded width, and no collective.

  `decode_segments` > 1 splits decoding into loops that each attend only to the part of the
  KV cache filled so far. On CPU the window slice costs more than it saves (hence 1, the
  default); on accelerators with long caches it can pay off.
  """
  longest = _check(
    model, prompt_ids, num_samples, max_new_tokens, temperature, top_p, top_k, max_new_tokens
  )
  prompt, mask, index, _ = _prompt_batch(
    prompt_ids, longest, mesh, prompt_bucket, pad_id, host_rows
  )
  graphdef, state = nnx.split(model)
  statics = _statics(
    num_samples, max_new_tokens, temperature, top_p, top_k, eos_ids, pad_id, decode_segments
  )
  key = jax.random.key(seed)
  with mesh_scope(mesh):
    if multihost.spans_processes(mesh):
      prompt_d, mask_d, index_d = _to_mesh((prompt, mask, index), mesh)
    else:
      (prompt_d, mask_d), index_d = _to_mesh((prompt, mask), mesh), index
    out = _generate(graphdef, state, prompt_d, mask_d, index_d, key, **statics)
    rows = len(prompt_ids) * num_samples
    tokens, logprobs, lengths = _local(out, mesh, rows)
  return SampleOutput(
    prompt_ids=np.repeat(prompt[: len(prompt_ids)], num_samples, axis=0),
    prompt_mask=np.repeat(mask[: len(prompt_ids)], num_samples, axis=0),
    tokens=tokens,
    logprobs=logprobs,
    lengths=lengths,
    groups=np.repeat(np.arange(len(prompt_ids), dtype=np.int32), num_samples),
  )


# ---------------------------------------------------------------------------
# Conversations: several turns on the rows' own KV caches
# ---------------------------------------------------------------------------

_TURN_SALT = 1 << 30  # turn k > 0 draws from fold_in(row key, salt + k); steps stay below it


@functools.partial(
  jax.jit, static_argnames=("graphdef", "num_samples", "cache_len", *_DECODE_STATICS)
)
def _first_turn(
  graphdef, state, prompt, prompt_mask, prompt_index, key, *, num_samples, cache_len, **decoding
):
  """`_generate` into a cache with room for the later turns; also returns what they need."""
  model: Decoder = nnx.merge(graphdef, state)
  layer_params = model.layer_params()
  cache, last, position = _prefill(
    model, layer_params, prompt, prompt_mask, num_samples=num_samples, cache_len=cache_len
  )
  row_keys = _row_keys(key, prompt_index, num_samples)
  done = jnp.zeros((last.shape[0],), bool)
  final = _decode(
    model, layer_params, cache, last, position, done, row_keys, start=prompt.shape[1], **decoding
  )
  carry = dict(cache=final["cache"], position=final["position"], row_keys=row_keys)
  return final["tokens"], final["logprobs"], final["lengths"], carry


@functools.partial(
  jax.jit, static_argnames=("graphdef", *_DECODE_STATICS), donate_argnames=("carry",)
)
def _next_turn(
  graphdef, state, carry, feedback, feedback_mask, turn, feedback_at, start, **decoding
):
  """Prefills each row's feedback (left-padded, [N, F]) at cache slots feedback_at.. and
  decodes the next turn from slot `start`; rows without feedback are done from the start.
  Every later turn is one compiled program: `turn` and the slots are traced, and attention
  reads the whole cache."""
  model: Decoder = nnx.merge(graphdef, state)
  layer_params = model.layer_params()
  position = carry["position"]
  positions = position[:, None] + jnp.maximum(
    jnp.cumsum(feedback_mask.astype(jnp.int32), axis=-1) - 1, 0
  )
  cache = carry["cache"]
  logits, cache = model.forward_cached(
    feedback, positions, feedback_mask, cache, feedback_at, layer_params, last_logits_only=True
  )
  last = constrain(logits[:, -1], ("batch", "vocab"))
  position = position + jnp.sum(feedback_mask, axis=-1, dtype=jnp.int32)
  done = ~jnp.any(feedback_mask, axis=-1)
  row_keys = jax.vmap(lambda k: jax.random.fold_in(k, _TURN_SALT + turn))(carry["row_keys"])
  final = _decode(
    model,
    layer_params,
    _constrain_cache(cache),
    last,
    position,
    done,
    row_keys,
    start=start,
    window=cache.valid.shape[1],
    **decoding,
  )
  carry = dict(cache=final["cache"], position=final["position"], row_keys=carry["row_keys"])
  return final["tokens"], final["logprobs"], final["lengths"], carry


class Conversation:
  """Up to `turns` answers per row, each continuing the row's own KV cache: between turns
  every row's next user turn (its feedback, tokenized through the chat template) is prefilled
  into its cache and decoding resumes. Nothing is re-tokenized or re-prefilled.

      conversation = Conversation(model, prompt_ids, turns=3, feedback_len=256, ...)
      first = conversation.first           # SampleOutput of turn 1 (as `sample` returns it)
      second = conversation.reply(feedback_ids)   # one id list per row; [] ends the row

  Shapes are static: the cache holds the prompt (bucketed) and, per turn, `max_new_tokens`
  answer slots and `feedback_len` feedback slots; turn k (from 0) decodes into slots from
  P + k (N + F), the feedback before it fills the F slots before that, left-padded. Slots a
  row leaves empty (an early end, padding) are masked, and positions count a row's real
  tokens, so a row sees exactly its own conversation. Turn 1 is `sample`'s program; all later
  turns share one (the slots are traced). A row without
  feedback is done: it stays masked and yields no tokens. Turn 1 draws exactly what `sample`
  draws; turn k > 0 draws from its own keys, again per (prompt index, sample). On a mesh
  across hosts every process calls `reply` the same number of times (with [] for rows it has
  ended); with `host_rows` (as `sample`'s) each host's conversation is its own.
  """

  def __init__(
    self,
    model: Decoder,
    prompt_ids: Sequence[Sequence[int]],
    *,
    turns: int,
    feedback_len: int,
    num_samples: int = 1,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    eos_ids: Sequence[int],
    pad_id: int,
    seed: int = 0,
    mesh: Mesh | None = None,
    prompt_bucket: int = 64,
    decode_segments: int = 1,
    host_rows: HostRows | None = None,
  ):
    if turns < 1 or feedback_len < 1:
      raise ValueError(
        f"Conversation: turns={turns} and feedback_len={feedback_len} must be positive"
      )
    self.turns, self.feedback_len, self.mesh = turns, feedback_len, mesh
    self.max_new_tokens, self.prompt_bucket, self.pad_id = max_new_tokens, prompt_bucket, pad_id
    budget = turns * max_new_tokens + (turns - 1) * feedback_len
    longest = _check(
      model, prompt_ids, num_samples, max_new_tokens, temperature, top_p, top_k, budget
    )
    prompt, mask, index, extra = _prompt_batch(
      prompt_ids, longest, mesh, prompt_bucket, pad_id, host_rows
    )
    self.prompt_len = prompt.shape[1]
    self.rows = len(prompt_ids) * num_samples
    self._padding_rows = extra * num_samples
    self._graphdef, self._state = nnx.split(model)
    self._statics = _statics(
      num_samples, max_new_tokens, temperature, top_p, top_k, eos_ids, pad_id, decode_segments
    )
    self.turn = 0
    with self._on_mesh():
      if multihost.spans_processes(mesh):
        prompt_d, mask_d, index_d = _to_mesh((prompt, mask, index), mesh)
      else:
        (prompt_d, mask_d), index_d = _to_mesh((prompt, mask), mesh), index
      *out, self._carry = _first_turn(
        self._graphdef,
        self._state,
        prompt_d,
        mask_d,
        index_d,
        jax.random.key(seed),
        cache_len=self.prompt_len + budget,
        **self._statics,
      )
      tokens, logprobs, lengths = _local(out, mesh, self.rows)
    self._prompt = np.repeat(prompt[: len(prompt_ids)], num_samples, axis=0)
    self._prompt_mask = np.repeat(mask[: len(prompt_ids)], num_samples, axis=0)
    self._groups = np.repeat(np.arange(len(prompt_ids), dtype=np.int32), num_samples)
    self.first = self._output(tokens, logprobs, lengths)

  def _on_mesh(self):
    return mesh_scope(self.mesh)

  def _output(self, tokens, logprobs, lengths) -> SampleOutput:
    return SampleOutput(
      prompt_ids=self._prompt,
      prompt_mask=self._prompt_mask,
      tokens=tokens,
      logprobs=logprobs,
      lengths=lengths,
      groups=self._groups,
    )

  def reply(self, feedback: Sequence[Sequence[int]]) -> SampleOutput:
    """The next turn of every row that gets feedback (one id list per row of this host, []
    for rows that have ended); `prompt_ids` of the output are still the first prompts."""
    if self.turn + 1 >= self.turns:
      raise ValueError(f"Conversation: all {self.turns} turns are taken")
    if len(feedback) != self.rows:
      raise ValueError(f"Conversation.reply: {len(feedback)} feedback rows for {self.rows} rows")
    longest = max(len(ids) for ids in feedback)
    if longest > self.feedback_len:
      raise ValueError(
        f"Conversation.reply: feedback of {longest} tokens exceeds feedback_len={self.feedback_len}"
      )
    ids, mask = pad_rows(
      list(feedback) + [[]] * self._padding_rows, self.feedback_len, self.pad_id, left=True
    )
    self.turn += 1
    start = self.prompt_len + self.turn * (self.max_new_tokens + self.feedback_len)
    with self._on_mesh():
      ids_d, mask_d = _to_mesh((ids, mask), self.mesh)
      decoding = {k: v for k, v in self._statics.items() if k != "num_samples"}
      *out, self._carry = _next_turn(
        self._graphdef,
        self._state,
        self._carry,
        ids_d,
        mask_d,
        jnp.int32(self.turn),
        jnp.int32(start - self.feedback_len),
        jnp.int32(start),
        **decoding,
      )
      return self._output(*_local(out, self.mesh, self.rows))
