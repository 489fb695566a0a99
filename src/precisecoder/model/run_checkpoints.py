"""Reading the policy out of a training run's Orbax checkpoints (for model/loading.py).

TRAIN writes `<workdir>/checkpoints/<step>/{params,opt_state,meta}` (train/checkpoint_writer.py).
`meta["model"]` (see `model_meta`) records the ModelConfig and where the tokenizer lives; the
`params` item is the model's `nnx.Param` state, as an `nnx.State` or a pure dict. Parameters are
restored straight onto their shardings when a mesh is given.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
from collections.abc import Callable
from typing import Any, Iterator

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, SingleDeviceSharding

from precisecoder.model.config import ModelConfig
from precisecoder.model import lora as lora_lib
from precisecoder.model.decoder import Decoder, abstract_decoder
from precisecoder.model.sharding import named_sharding

_SKIP_KEYS = {"value", "raw_value", "_value"}  # Variable wrappers in a saved nnx.State


def model_meta(
  config: ModelConfig,
  tokenizer_source: str | os.PathLike,
  *,
  lora: lora_lib.LoraConfig | None = None,
  base: str | os.PathLike = "",
  seed: int = 0,
) -> dict[str, Any]:
  """The JSON that a training checkpoint's `meta["model"]` holds, so it can be loaded alone.

  A local tokenizer source is recorded as an absolute path (the checkpoint is read from other
  working directories); anything else (a hub id) as given. A LoRA run's checkpoints hold the
  adapters only: `lora` records them with the base they go on (`base`, a checkpoint, or ""
  for the random init of `seed`)."""
  meta = {"config": dataclasses.asdict(config), "tokenizer": _recorded(tokenizer_source)}
  if lora is not None:
    meta["lora"] = {**lora.to_json(), "base": _recorded(base) if base else "", "seed": seed}
  return meta


def _recorded(source: str | os.PathLike) -> str:
  path = pathlib.Path(source)
  return str(path.absolute() if path.exists() else source)


def _step_dir(path: pathlib.Path) -> pathlib.Path:
  """The newest `<step>` folder under a workdir, its `checkpoints` folder, or the step itself."""
  if (path / "params").is_dir() and (path / "meta").exists():
    return path
  root = path / "checkpoints" if (path / "checkpoints").is_dir() else path
  steps = sorted(
    (p for p in root.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
  )
  if not steps:
    raise FileNotFoundError(
      f"{path}: not a Hugging Face folder, a .gguf file or a training "
      "checkpoint (no <step>/params under it or under checkpoints/)"
    )
  return steps[-1]


def _read_meta(step_dir: pathlib.Path) -> dict[str, Any]:
  meta_dir = step_dir / "meta"
  files = [meta_dir] if meta_dir.is_file() else sorted(meta_dir.glob("*"))
  for file in files:
    if file.is_file():
      try:
        data = json.loads(file.read_text())
      except (json.JSONDecodeError, UnicodeDecodeError):
        continue
      if isinstance(data, dict) and "model" in data:
        return data
  raise ValueError(f"{meta_dir}: no JSON with a 'model' entry (written by model_meta)")


# How Orbax/TensorStore word a file shorter than its index says: the OCDBT manifest's length
# header, a chunk's byte range past the file's end.
_TRUNCATION_SIGNS = ("does not match actual length", "is not valid for value of size")


@contextlib.contextmanager
def _orbax_errors(params_dir: pathlib.Path) -> Iterator[None]:
  """Orbax's failures (bare Exceptions, tensorstore specs pages long) as one ValueError line
  naming the folder, saying "truncated" when a file is shorter than its index or JSON says."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except  # Orbax raises bare Exceptions
    if isinstance(e, ValueError) and str(e).startswith(str(params_dir)):
      raise  # ours (a parameter that does not fit): as it is
    raise ValueError(f"{params_dir}: {_orbax_reason(e)}") from e


def _orbax_reason(error: BaseException) -> str:
  chain = []
  while error is not None and len(chain) < 16:
    chain.append(error)
    error = error.__cause__ or error.__context__
  for e in chain:
    text = str(e)
    cut = isinstance(e, json.JSONDecodeError) and e.pos >= len(e.doc.rstrip())
    if cut or any(sign in text for sign in _TRUNCATION_SIGNS):
      return f"truncated Orbax checkpoint ({_first_line(text)})"
  return f"unreadable Orbax checkpoint ({_first_line(str(chain[-1]))})"


def _first_line(text: str, limit: int = 400) -> str:
  line = text.strip().splitlines()[0] if text.strip() else "no reason given"
  return line if len(line) <= limit else line[:limit] + "..."


def _normalise(path: tuple[Any, ...]) -> tuple[str, ...]:
  keys = []
  for entry in path:
    key = getattr(entry, "key", getattr(entry, "name", getattr(entry, "idx", entry)))
    if str(key) not in _SKIP_KEYS:
      keys.append(str(key))
  return tuple(keys)


def read_config(path: str | os.PathLike, *, dtype: str = "float32", **execution) -> ModelConfig:
  """The ModelConfig of a workdir's latest checkpoint (or of one step), without its weights."""
  step_dir = _step_dir(pathlib.Path(path).absolute())
  return _config(step_dir, _read_meta(step_dir)["model"], dtype, execution)


def _config(step_dir: pathlib.Path, meta: dict[str, Any], dtype: str, execution) -> ModelConfig:
  fields = dict(meta["config"], dtype=dtype, **execution)
  fields["eos_token_ids"] = tuple(fields.get("eos_token_ids") or ())
  try:
    return ModelConfig(**fields)
  except TypeError as e:  # fields missing or unknown: not what model_meta wrote
    raise ValueError(
      f"{step_dir / 'meta'}: the saved model config does not fit ModelConfig ({e})"
    ) from None


def load(
  path: str | os.PathLike,
  *,
  dtype: str = "float32",
  mesh: Mesh | None = None,
  load_base: Callable[..., tuple[Decoder, Any, ModelConfig]] | None = None,
  **execution,
) -> tuple[Decoder, ModelConfig, pathlib.Path]:
  """(model, config, tokenizer source) from a workdir, its checkpoints dir or one step dir.

  `load_base`: how a LoRA run's base checkpoint is loaded (model/loading.py's
  `load_checkpoint`, which calls this module: passed in, so the two do not import each other).

  `execution`: ModelConfig's execution options (remat, attention, ...), not the saved ones.
  A LoRA run's checkpoint (adapters only) is read onto its base (`meta["model"]["lora"]`) and
  returned merged: a plain decoder whose weights are W + scale A B.
  """
  import orbax.checkpoint as ocp

  step_dir = _step_dir(pathlib.Path(path).absolute())  # Orbax refuses relative paths
  meta = _read_meta(step_dir)["model"]
  config = _config(step_dir, meta, dtype, execution)
  lora = lora_lib.LoraConfig.from_json(meta["lora"]) if meta.get("lora") else None
  graphdef, abstract = abstract_decoder(config, lora)
  ours = {p: v for p, v in nnx.to_flat_state(abstract)}

  params_dir = step_dir / "params"
  checkpointer = ocp.StandardCheckpointer()
  with _orbax_errors(params_dir):
    saved = checkpointer.metadata(params_dir)
  saved_tree = getattr(saved, "item_metadata", saved)
  saved_tree = getattr(saved_tree, "tree", saved_tree)

  def target(leaf_path, leaf):
    key = _normalise(leaf_path)
    if key not in ours:
      raise ValueError(f"{params_dir}: saved parameter {'/'.join(key)} is not in the model")
    var = ours[key]
    shape = tuple(var.get_value().shape)
    if tuple(leaf.shape) != shape:
      raise ValueError(
        f"{params_dir}: {'/'.join(key)} has shape {tuple(leaf.shape)}; config implies {shape}"
      )
    sharding = (
      named_sharding(var.get_metadata()["logical_axes"], shape, mesh)
      if mesh
      else SingleDeviceSharding(jax.devices()[0])
    )
    return jax.ShapeDtypeStruct(shape, np.dtype(jax.numpy.dtype(dtype)), sharding=sharding)

  abstract_saved = jax.tree_util.tree_map_with_path(
    target, saved_tree, is_leaf=lambda x: hasattr(x, "shape") and hasattr(x, "dtype")
  )
  with _orbax_errors(params_dir):
    restored = checkpointer.restore(params_dir, abstract_saved)
  values = {_normalise(p): v for p, v in jax.tree_util.tree_flatten_with_path(restored)[0]}
  if lora is not None:
    adapters = [k for k in ours if lora_lib.is_adapter(k)]
    absent = sorted("/".join(k) for k in adapters if k not in values)
    if absent:
      raise ValueError(f"{params_dir}: LoRA adapters missing from the checkpoint: {absent}")
    base = _lora_base(meta["lora"], config, dtype, mesh, execution, load_base)
    values = {
      **{_normalise(p): v.get_value() for p, v in nnx.to_flat_state(nnx.state(base))},
      **values,
    }
  missing = set(ours) - set(values)
  if missing:
    raise ValueError(
      f"{params_dir}: parameters missing from the checkpoint: "
      f"{sorted('/'.join(m) for m in missing)}"
    )
  flat = [(p, var.replace(values[p])) for p, var in ours.items()]
  model = lora_lib.merged(nnx.merge(graphdef, nnx.from_flat_state(flat)))
  return model, config, pathlib.Path(meta["tokenizer"])


def _lora_base(
  lora: dict[str, Any],
  config: ModelConfig,
  dtype: str,
  mesh: Mesh | None,
  execution: dict[str, Any],
  load_base: Callable | None,
) -> Decoder:
  """The frozen base a LoRA run trained on: its checkpoint, or the random init of its seed."""
  if lora.get("base"):
    if load_base is None:
      raise ValueError(
        f"a LoRA run on the base {lora['base']}: load it with precisecoder.model.load_checkpoint"
      )
    model, _, base_config = load_base(
      lora["base"], dtype=dtype, mesh=mesh, with_tokenizer=False, **execution
    )
    shape = (
      "arch",
      "vocab_size",
      "hidden_size",
      "num_layers",
      "num_heads",
      "num_kv_heads",
      "head_dim",
      "intermediate_size",
      "tie_embeddings",
    )
    differ = [
      f"{f} {getattr(base_config, f)} vs {getattr(config, f)}"
      for f in shape
      if getattr(base_config, f) != getattr(config, f)
    ]
    if differ:
      raise ValueError(
        f"LoRA base {lora['base']} is not the model the adapters were trained "
        f"on ({', '.join(differ)})"
      )
    return model
  model = Decoder(config, rngs=nnx.Rngs(int(lora.get("seed", 0))))
  if mesh is not None:
    from precisecoder.model.sharding import shard_model  # pylint: disable=import-outside-toplevel

    model = shard_model(model, mesh)
  return model
