"""Scoring on reward servers (`precisecoder serve` subprocesses on loopback): the same terms
as local scoring, round-robin over servers, retries past a dead one, a clear failure when all
are down or a server scores with other settings; `score --reward-urls`; and our RL trainer
scoring one step on two servers."""

import json
import socket

import numpy as np
import pytest

from integration_helpers import (
  http,
  make_task_set,
  reward_server,
  rows_for,
  score_command,
  write_task_file,
)
from precisecoder import predictions, rewards
from precisecoder.execution import ExecutionPool
from precisecoder.integrations import client
from precisecoder.integrations.types import ConfigurationError


def _dead_url():
  """A loopback port nothing listens on (bound, then closed)."""
  with socket.create_server(("127.0.0.1", 0)) as sock:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture(scope="module")
def task_set():
  return make_task_set()


@pytest.fixture(scope="module")
def servers(tmp_path_factory, task_set):
  """Two servers that know only the first task: the client sends the others inline."""
  folder = tmp_path_factory.mktemp("servers")
  task_file = write_task_file(folder, task_set[:1])
  with (
    reward_server(task_file, log=folder / "a.log") as (a, _),
    reward_server(task_file, log=folder / "b.log") as (b, _),
  ):
    yield a, b


def test_remote_terms_equal_local_terms_round_robin(servers, task_set):
  ids, completions = rows_for(task_set)
  table = {t.task_id: t for t in task_set}
  tasks = [table[i] for i in ids]
  programs = [predictions.resolve({"completion": c})[0] for c in completions]
  remote = client.RemoteScorer(list(servers), lam=0.4, max_items=8)
  got = remote.score(tasks, programs)
  with ExecutionPool(workers=1) as pool:
    want = rewards.RewardScorer(pool, lam=0.4).score(tasks, programs)
  assert set(got) == set(want)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
  assert len(set(want["reward"].tolist())) > 2
  counts = [http(url + "/health")[1]["requests"].get("/score", 0) for url in servers]
  assert all(c >= 1 for c in counts) and sum(counts) == remote.stats()["remote_requests"] == 3
  remote.close()


def test_a_dead_server_is_retried_past_and_all_dead_is_an_error(servers, task_set):
  task = task_set[0]
  remote = client.RemoteScorer([_dead_url(), servers[0]], backoff_s=0.01)
  terms = remote.score([task], [task.gt_solution])
  assert terms["unit"].tolist() == [1.0] and remote.stats()["remote_retries"] == 1
  remote.close()
  dead = client.RemoteScorer([_dead_url(), _dead_url()], retries=2, backoff_s=0.01)
  with pytest.raises(client.RemoteScoringError, match="failed on every attempt") as error:
    dead.score([task], [task.gt_solution])
  assert error.value.args[0].count("ConnectionRefusedError") == 3
  dead.close()


def test_other_settings_or_a_refused_token_are_configuration_errors(tmp_path, task_set, servers):
  task = task_set[0]
  remote = client.RemoteScorer([servers[0]], epsilon=1)
  with pytest.raises(ConfigurationError, match="epsilon=None"):
    remote.score([task], [task.gt_solution])
  remote.close()
  token_file = tmp_path / "token"
  token_file.write_text("s3cret\n")
  with reward_server(write_task_file(tmp_path, task_set[:1]), "--token-file", str(token_file)) as (
    url,
    _,
  ):
    with pytest.raises(ConfigurationError, match="HTTP 401"):
      client.RemoteScorer([url], token="").score([task], [task.gt_solution])
    good = client.RemoteScorer([url], token="s3cret")
    assert good.score([task], [task.gt_solution])["unit"].tolist() == [1.0]
    good.close()


def test_score_command_on_servers_writes_what_local_scoring_writes(tmp_path, task_set, servers):
  task_file = write_task_file(tmp_path, task_set)
  ids, completions = rows_for(task_set)
  local = score_command(tmp_path, task_file, ids, completions)
  remote = score_command(tmp_path, task_file, ids, completions, "--reward-urls", ",".join(servers))
  assert remote == local


@pytest.mark.slow  # a tiny RL step compiles sampling and training: minutes on a loaded host
def test_rl_trainer_scores_on_two_servers_as_it_scores_locally(tmp_path, servers, monkeypatch):
  """One tiny RL step with rl.reward_urls = both servers: every batch the trainer scored
  remotely has exactly the terms a local RewardScorer gives the same programs."""
  from precisecoder.train import config as train_config, rl  # pylint: disable=import-outside-toplevel

  seen = []
  real_score = client.RemoteScorer.score

  def spy(self, tasks, programs):
    terms = real_score(self, tasks, programs)
    seen.append((list(tasks), list(programs), terms))
    return terms

  monkeypatch.setattr(client.RemoteScorer, "score", spy)
  cfg = train_config.default("tiny")
  cfg.rl.max_new_tokens = 16
  cfg.rl.reward_urls = ",".join(servers)
  cfg.train.update(steps=1, eval_every=0, report=False, checkpoint_every=0)
  before = [http(u + "/health")[1]["requests"].get("/score", 0) for u in servers]
  assert rl.train(cfg, str(tmp_path / "run")) == 0
  after = [http(u + "/health")[1]["requests"].get("/score", 0) for u in servers]
  assert all(a > b for a, b in zip(after, before))  # both servers scored
  assert sum(len(p) for _, p, _ in seen) == cfg.rl.prompts_per_step * cfg.rl.group_size
  with ExecutionPool(workers=1) as pool:
    local = rewards.RewardScorer(pool, lam=cfg.rl.lam)
    for tasks, programs, terms in seen:
      want = local.score(tasks, programs)
      for key in want:
        np.testing.assert_array_equal(terms[key], want[key], err_msg=key)
  logged = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
  units = np.concatenate([t["unit"] for _, _, t in seen])
  assert logged["reward/unit"] == pytest.approx(float(units.mean()))
