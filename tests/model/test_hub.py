"""Hub ids as checkpoints: cached snapshots resolve offline; a missing one is a clear error."""

import pytest

from precisecoder.model import hub
from precisecoder.model.loading import CheckpointError, load_checkpoint


def _fake_cache(root, repo_id, revision="0123abcd"):
  """The Hugging Face cache layout: refs/main names the snapshot folder."""
  repo = root / f"models--{repo_id.replace('/', '--')}"
  snapshot = repo / "snapshots" / revision
  snapshot.mkdir(parents=True)
  (snapshot / "config.json").write_text("{}")
  (repo / "refs").mkdir()
  (repo / "refs" / "main").write_text(revision)
  return snapshot


def test_cached_hub_id_resolves_offline_and_paths_stay_paths(tmp_path, monkeypatch):
  from huggingface_hub import constants

  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
  snapshot = _fake_cache(tmp_path / "cache", "Qwen/Qwen3-0.6B")
  assert hub.resolve("Qwen/Qwen3-0.6B") == str(snapshot)
  local = tmp_path / "Owner" / "model"
  local.mkdir(parents=True)
  assert hub.resolve(str(local)) == str(local)
  assert hub.resolve("model.gguf") == "model.gguf"  # not an id: left to the loader


def test_uncached_hub_id_offline_is_a_clear_error(tmp_path, monkeypatch):
  from huggingface_hub import constants

  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
  with pytest.raises(CheckpointError, match=r"Qwen/Qwen3-4B: .*not in the cache.*HF_HUB_OFFLINE"):
    load_checkpoint("Qwen/Qwen3-4B")
