"""Hugging Face Hub ids as checkpoints: `Qwen/Qwen3-4B` -> a local snapshot folder.

The run presets name hub ids; a fresh TPU VM has no copy. `resolve` downloads the weights,
config and tokenizer files once into the Hugging Face cache (HF_HOME; every host its own) and
returns the snapshot folder; later calls, and runs with HF_HUB_OFFLINE=1, read the cache.
An id that is not cached while offline is a clear error, not a hang or a stack of retries.
"""

from __future__ import annotations

import os
import re

from absl import logging

# owner/name, as the hub spells repository ids; a local path never looks like this unless it
# exists, and existing paths are taken as paths.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# What a checkpoint folder needs: config, safetensors (sharded index too), tokenizer files.
_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "tokenizer*"]


class HubError(FileNotFoundError):
  """A hub id that cannot be had: offline and not cached, unknown, or the download failed."""


def is_hub_id(source: str) -> bool:
  return bool(_HUB_ID.fullmatch(source)) and not os.path.exists(source)


def resolve(source: str) -> str:
  """`source` itself unless it is a hub id not present as a local path; else the local
  snapshot folder of that id (downloaded on first use)."""
  if not is_hub_id(source):
    return source
  import huggingface_hub  # pylint: disable=import-outside-toplevel  # only for hub ids
  from huggingface_hub import constants, errors  # pylint: disable=import-outside-toplevel

  offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")
  try:
    path = huggingface_hub.snapshot_download(
      source, allow_patterns=_FILES, local_files_only=offline
    )
  except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled) as e:
    raise HubError(
      f"{source}: no such local path, and as a Hugging Face Hub id it is not in the cache "
      f"({constants.HF_HUB_CACHE}) while downloads are off "
      f"(HF_HUB_OFFLINE=1). Download it once with network access (`huggingface-cli "
      f"download {source}`) or point model.checkpoint at a local folder"
    ) from e
  except (errors.RepositoryNotFoundError, errors.HfHubHTTPError, OSError) as e:
    raise HubError(f"{source}: cannot download from the Hugging Face Hub: {e}") from e
  logging.info("%s: %s", source, path)
  return path
