"""Hugging Face folders: config.json + safetensors (single file or sharded index), both ways."""

from __future__ import annotations

import json
import os
import pathlib

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from precisecoder.model import lora
from precisecoder.model.build import build_decoder
from precisecoder.model.config import ModelConfig
from precisecoder.model.decoder import Decoder
from precisecoder.model.weights import weight_specs

_INDEX = "model.safetensors.index.json"
_SINGLE = "model.safetensors"


def read_config(folder: str | os.PathLike, **overrides) -> ModelConfig:
  path = pathlib.Path(folder) / "config.json"
  try:
    hf = json.loads(path.read_text())
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: no config.json in this checkpoint folder") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
  return ModelConfig.from_hf(hf, where=str(path), **overrides)


def _open_safetensors(file: pathlib.Path):
  """safe_open, with a file shorter than its own header says reported as truncated."""
  try:
    return safe_open(file, "numpy")
  except SafetensorError as e:
    problem = _truncation(file) or f"not a readable safetensors file ({e})"
    raise ValueError(f"{file}: {problem}") from None


def _truncation(file: pathlib.Path) -> str | None:
  """How a safetensors file falls short of the length its header declares, if it does."""
  size = file.stat().st_size
  with file.open("rb") as f:
    head = f.read(8)
    if len(head) < 8:
      return f"truncated safetensors file ({size} bytes: not even its 8-byte header length)"
    length = int.from_bytes(head, "little")
    if length > 100 << 20:  # no real header is this long: garbage, not a cut
      return None
    if 8 + length > size:
      return f"truncated safetensors file ({size} bytes; its header alone needs {8 + length})"
    try:
      header = json.loads(f.read(length))
      end = max(
        (entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"),
        default=0,
      )
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
      return None  # a garbled header, not a cut: safetensors' own message says more
  if 8 + length + end > size:
    return f"truncated safetensors file ({size} bytes; its tensors need {8 + length + end})"
  return None


class SafetensorsReader:
  """Reads tensors by name from a folder's safetensors files (memory-mapped)."""

  def __init__(self, folder: str | os.PathLike):
    folder = pathlib.Path(folder)
    if (folder / _INDEX).exists():
      index = json.loads((folder / _INDEX).read_text())["weight_map"]
      self._files = {name: folder / file for name, file in index.items()}
    else:
      files = sorted(folder.glob("*.safetensors"))
      if not files:
        raise FileNotFoundError(f"{folder}: no *.safetensors files")
      self._files = {}
      for file in files:
        with _open_safetensors(file) as f:
          self._files.update({name: file for name in f.keys()})
    self._open = {}

  def names(self) -> set[str]:
    return set(self._files)

  def __call__(self, name: str) -> np.ndarray:
    if name not in self._files:
      raise KeyError(f"tensor {name!r} not found in the checkpoint's safetensors files")
    file = self._files[name]
    if file not in self._open:
      self._open[file] = _open_safetensors(file)
    return self._open[file].get_tensor(name)


def load_hf(
  folder: str | os.PathLike, *, dtype: str = "float32", mesh: Mesh | None = None, **execution
) -> tuple[Decoder, ModelConfig]:
  config = read_config(folder, dtype=dtype, **execution)
  reader = SafetensorsReader(folder)
  if config.tie_embeddings is False and "lm_head.weight" not in reader.names():
    raise ValueError(f"{folder}: config says untied embeddings but there is no lm_head.weight")
  return build_decoder(config, reader, mesh=mesh, where=str(folder)), config


def export_hf(
  model: Decoder,
  config: ModelConfig,
  tokenizer,
  out_dir: str | os.PathLike,
  *,
  dtype: str | None = None,
) -> pathlib.Path:
  """Writes config.json, model.safetensors and the tokenizer files to `out_dir`. A model with
  LoRA adapters is written merged (W + scale A B; the model itself is left as it is)."""
  if getattr(model, "lora", None) is not None:
    model = lora.merged(nnx.clone(model))
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  dtype = dtype or config.dtype
  np_dtype = np.dtype(jax.numpy.dtype(dtype))
  flat = dict(nnx.to_flat_state(nnx.state(model, nnx.Param)))
  tensors = {}
  for spec in weight_specs(config):
    value = np.asarray(jax.device_get(flat[spec.path].get_value()))
    if spec.per_layer:
      for i in range(config.num_layers):
        tensors[spec.hf_name.format(i=i)] = spec.to_hf(value[i]).astype(np_dtype)
    else:
      tensors[spec.hf_name] = spec.to_hf(value).astype(np_dtype)
  save_file(tensors, str(out / _SINGLE), metadata={"format": "pt"})
  hf = config.replace(dtype=dtype).to_hf()
  (out / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
  if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
    tokenizer.save_pretrained(str(out))
  return out
