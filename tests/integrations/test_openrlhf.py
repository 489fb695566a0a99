"""OpenRLHF: the reward file loaded and called as its SingleTurnAgentExecutor does
(openrlhf 0.11.2): `spec_from_file_location("reward_func", path)`, then
`reward_func([query], [prompt], [label])` in `asyncio.to_thread`, one sample per call."""

import asyncio
import importlib.util
import math

import pytest

from integration_helpers import (
  DownBackend,
  completions_for,
  make_task_set,
  share_backend,
  write_task_file,
)
from precisecoder.integrations import openrlhf


def _load_like_openrlhf(path):
  spec = importlib.util.spec_from_file_location("reward_func", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.reward_func


def test_reward_file_called_as_openrlhf_calls_it(tmp_path, monkeypatch):
  task_set = make_task_set()
  monkeypatch.setenv("PRECISECODER_TASKS", str(write_task_file(tmp_path, task_set)))
  monkeypatch.setenv("PRECISECODER_REWARD", "unit")
  reward_func = _load_like_openrlhf(openrlhf.__file__)
  task = task_set[1]
  prompt = f"<|im_start|>user\n{task.buggy_code}<|im_end|>\n<|im_start|>assistant\n"
  answers = completions_for(task)

  async def rollouts():  # one sample per call, concurrently, as the executor's rollouts run
    calls = [
      asyncio.to_thread(reward_func, [prompt + a + "<|im_end|>"], [prompt], [task.task_id])
      for a in answers
    ]
    return await asyncio.gather(*calls)

  infos = asyncio.run(rollouts())
  assert [info["rewards"] for info in infos] == [[1.0], [0.0], [1.0], [0.0]]
  assert all(info["scores"] == info["rewards"] for info in infos)
  assert 0 < infos[2]["extra_logs"]["precision"][0] < 1
  assert set(infos[0]["extra_logs"]) >= {"unit", "precision", "recall", "f1", "edit_lines"}


def test_not_scored_is_none_reward_and_nan_logs(tmp_path, monkeypatch):
  task_set = make_task_set()[:1]
  monkeypatch.setenv("PRECISECODER_TASKS", str(write_task_file(tmp_path, task_set)))

  share_backend(DownBackend())
  info = openrlhf.reward_func(["P answer"], ["P "], [task_set[0].task_id])
  assert info["rewards"] == [None]
  assert all(math.isnan(v[0]) for v in info["extra_logs"].values())


def test_needs_its_task_file(monkeypatch):
  monkeypatch.delenv("PRECISECODER_TASKS", raising=False)
  with pytest.raises(ValueError, match="PRECISECODER_TASKS"):
    openrlhf.reward_func(["q"], ["p"], ["t"])


# The OpenRLHF flags our instructions use, as openrlhf/cli/train_ppo_ray.py (0.11) spells them:
# 0.11 namespaces them (`--data.label_key`, `--reward.remote_url`); `--label_key` is refused.
_OPENRLHF_FLAGS = {"--reward.remote_url", "--data.label_key"}


def test_the_instructions_name_openrlhf_flags_as_it_spells_them():
  import pathlib  # pylint: disable=import-outside-toplevel
  import re  # pylint: disable=import-outside-toplevel

  docs = (pathlib.Path(__file__).parents[2] / "docs" / "integrations.md").read_text()
  paragraph = docs[docs.index("**OpenRLHF**") :]
  paragraph = paragraph[: paragraph.index("\n\n")]
  for text in (paragraph, openrlhf.__doc__):
    flags = set(re.findall(r"--[a-z_.]+", text))
    assert flags == _OPENRLHF_FLAGS, text
