"""The memory check sizes a run before anything loads, including a base not yet built."""

from precisecoder.model import architectures
from precisecoder.train import config as config_lib, footprint


def test_a_base_checkpoint_is_sized_from_its_preset_without_building_it(monkeypatch, tmp_path):
  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  cfg = config_lib.default("local")
  assert cfg.model.checkpoint == "base"
  config = footprint.model_config(cfg)
  assert config.num_params() == architectures.get(cfg.base.model).num_params()
  assert not (tmp_path / "bases").exists()  # nothing built
  footprint.check(cfg, hosts=1, devices=1)  # the main job's step fits this machine
