"""`precisecoder train` refuses what cannot work in one line (exit 2) before any model loads."""

import json
import pathlib
import sys

import pytest
from absl import flags

from precisecoder.train import config as config_lib
from precisecoder.commands import train as train_command

CONFIGS = sorted(pathlib.Path(__file__).resolve().parents[2].joinpath("configs").glob("*.py"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_and_preset_validates(path):
  if path.stem == "base":  # the small policy's base has presets of its own
    from precisecoder.data import sft_mixture

    for preset in config_lib.BASE_PRESETS:
      cfg = config_lib.load_file(f"{path}:{preset}")
      sft_mixture.check_weights({k: cfg.mixture[k] for k in sft_mixture.KINDS})
    return
  for preset in config_lib.RUN_PRESETS:
    config_lib.validate(config_lib.load_file(f"{path}:{preset}"))


@pytest.fixture(name="train")
def _train(monkeypatch, capsys):
  """Runs `precisecoder train ARGS` in-process up to the trainer, which it records; returns
  (exit status, stderr, [(config, workdir)] of the runs the trainer would have made)."""
  ran = []
  monkeypatch.setattr(train_command, "train", lambda cfg, workdir: ran.append((cfg, workdir)) or 0)
  return _caller(monkeypatch, capsys, ran)


@pytest.fixture(name="train_until_model")
def _train_until_model(monkeypatch, capsys):
  """Runs `precisecoder train ARGS` in-process through the trainer's start (workdir lock,
  resume checks) up to where the model would load, which raises _ModelWouldLoad."""
  from precisecoder.train import policy as policy_lib

  loaded = []

  def stop(cfg, mesh, checkpoint=None):
    loaded.append(cfg)
    raise _ModelWouldLoad()

  monkeypatch.setattr(policy_lib, "load_policy", stop)
  return _caller(monkeypatch, capsys, loaded)


class _ModelWouldLoad(Exception):
  pass


def _caller(monkeypatch, capsys, ran):
  def call(*args):
    # Each parse registers a flag per --config.* override (one process parses once): forget them.
    for name in [n for n in flags.FLAGS if n.startswith("config.")]:
      delattr(flags.FLAGS, name)
    flags.FLAGS["workdir"].unparse()
    # ml_collections reads --config.* overrides from sys.argv itself.
    monkeypatch.setattr(sys, "argv", ["precisecoder", "train", *args])
    with pytest.raises((SystemExit, _ModelWouldLoad)) as exit_info:
      train_command.main(list(args))
    code = exit_info.value.code if exit_info.type is SystemExit else None
    captured = capsys.readouterr()
    call.out = captured.out
    return code, captured.err, ran

  return call


def test_a_good_config_reaches_the_trainer_with_its_overrides(train, tmp_path):
  code, _, ran = train(
    f"--config={CONFIGS[0].parent / 'precisecoder.py'}:tiny",
    f"--workdir={tmp_path / 'run'}",
    "--config.rl.lam=0.5",
  )
  assert code == 0 and len(ran) == 1
  cfg, workdir = ran[0]
  assert cfg.rl.lam == 0.5 and pathlib.Path(workdir).is_dir()


CONFIG = str(CONFIGS[0].parent / "precisecoder.py")


@pytest.mark.parametrize(
  "args, message",
  [
    (["--config=configs/nope.py:tiny"], "--config=configs/nope.py:tiny: no such config file"),
    ([f"--config={CONFIG}:nope"], "unknown run preset 'nope'; known: "),
    (
      [f"--config={CONFIG}:tiny", "--config.rl.nope=1"],
      "--config.rl.nope=1: unknown override: config.rl has no field 'nope' (it has: advantage,",
    ),
    ([f"--config={CONFIG}:tiny", "--config.nope.x=1"], "config has no field 'nope'"),
    ([f"--config={CONFIG}:tiny", "--config.rl.lam.x=1"], "config.rl.lam is a value, not a section"),
    ([f"--config={CONFIG}:tiny", "--config.rl.lam=abc"], "--config.rl.lam=abc: could not convert"),
    ([f"--config={CONFIG}:tiny", "--wat=1"], "Unknown command line flag 'wat'"),
    (
      [f"--config={CONFIG}:tiny", "--config.rl.minibatch_size=3"],
      "config.rl.minibatch_size=3 must divide the 8 rows of a step (rl.prompts_per_step 2 x "
      "rl.group_size 4)",
    ),
    (
      [f"--config={CONFIG}:tiny", "--config.rl.prompts_per_step=0"],
      "config.rl.prompts_per_step=0: must be an integer >= 1",
    ),
    ([f"--config={CONFIG}:tiny", "--config.rl.group_size=1"], "config.rl.group_size=1: must be"),
    ([f"--config={CONFIG}:tiny", "--config.rl.max_new_tokens=0"], "config.rl.max_new_tokens=0"),
    ([f"--config={CONFIG}:tiny", "--config.rl.lam=1.5"], "config.rl.lam=1.5: must be a number in"),
    (
      [f"--config={CONFIG}:tiny", "--config.rl.reward_workers=1000"],
      "config.rl.reward_workers=1000: must be an integer in [1, 256]",
    ),
    (
      [f"--config={CONFIG}:tiny", "--config.multihost.heartbeat_timeout_s=0"],
      "config.multihost.heartbeat_timeout_s=0: must be an integer >= 1",
    ),
    (
      [f"--config={CONFIG}:tiny", "--config.rl.reward_urls=ftp://host:1"],
      "config.rl.reward_urls: reward server URL 'ftp://host:1': want http://HOST:PORT",
    ),
    (
      [f"--config={CONFIG}:tiny", "--config.rl.python=/no/such/python"],
      "config.rl.python='/no/such/python': no such executable",
    ),
    ([f"--config={CONFIG}:tiny", "--config.rl.reward=ea_grpo"], "use config.rl.advantage='grpo'"),
    ([f"--config={CONFIG}:tiny", "--config.trainer=ppo"], "config.trainer='ppo': must be one of"),
    ([f"--config={CONFIG}:tiny", "--config.data.task_file=/nonexistent.jsonl"], "no such file"),
    (
      [f"--config={CONFIG.replace('precisecoder.py', 'sft.py')}:tiny", "--config.sft.batch_size=0"],
      "config.sft.batch_size=0: must be an integer >= 1",
    ),
    (
      [
        f"--config={CONFIG.replace('precisecoder.py', 'dpo.py')}:tiny",
        "--config.dpo.samples_per_task=1",
      ],
      "config.dpo.samples_per_task=1",
    ),
  ],
)
def test_unusable_configs_are_one_line_before_any_model_loads(train, tmp_path, args, message):
  code, err, ran = train(*args, f"--workdir={tmp_path / 'run'}")
  assert code == 2 and not ran  # the trainer (and with it the model) never started
  assert err.startswith("precisecoder train: error: ") and len(err.strip().splitlines()) == 1, err
  assert message in err


def test_a_workdir_that_is_a_file_is_refused(train, tmp_path):
  (tmp_path / "file").write_text("")
  for workdir in (tmp_path / "file", tmp_path / "file" / "run"):
    code, err, ran = train(f"--config={CONFIG}:tiny", f"--workdir={workdir}")
    assert code == 2 and not ran
    assert f"--workdir={workdir}: is a file, or under one" in err
  code, err, _ = train(f"--config={CONFIG}:tiny")
  assert code == 2 and "--workdir must have a value" in err


def test_the_report_waits_for_the_last_step(tmp_path, capsys):
  """A run stopped before train.steps (train.stop_after, preemption) gets no report yet."""
  cfg = config_lib.load_file(f"{CONFIG}:tiny")
  (tmp_path / "eval").mkdir()
  for step in (0, 1):
    (tmp_path / "eval" / f"step_{step}.json").write_text(
      json.dumps({"step": step, "summary": {"pass": 0.5, "noop": 1.0}})
    )
  steps = [{"step": s, "reward": 0.1 * s, "time/step": 1.0} for s in range(1, cfg.train.steps)]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
  assert train_command.write_report(cfg, str(tmp_path)) is None
  assert not (tmp_path / "report.md").exists()
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write(json.dumps({"step": cfg.train.steps, "reward": 0.5, "time/step": 1.0}) + "\n")
  path = train_command.write_report(cfg, str(tmp_path))
  assert path == tmp_path / "report.md" and "| base (step 0) |" in path.read_text()
  assert f"Report: {path}" in capsys.readouterr().out


def test_a_workdir_held_by_another_run_is_refused_naming_the_holder(train_until_model, tmp_path):
  import os
  from precisecoder.train.workdir import Workdir

  held = Workdir(str(tmp_path / "run")).lock()
  held.acquire()  # another trainer, here: this process
  try:
    code, err, loaded = train_until_model(
      f"--config={CONFIG}:tiny", f"--workdir={tmp_path / 'run'}"
    )
  finally:
    held.release()
  assert code == 2 and not loaded
  assert (
    err.startswith(
      f"precisecoder train: error: --workdir={tmp_path / 'run'} is in use by another run: host "
    )
    and f", pid {os.getpid()}, started " in err
  )
  assert len(err.strip().splitlines()) == 1
  code, _, loaded = train_until_model(f"--config={CONFIG}:tiny", f"--workdir={tmp_path / 'run'}")
  assert code is None and len(loaded) == 1  # free again: the trainer went on to the model
  assert not (tmp_path / "run" / "lock").exists()  # a run that could not start let go


def test_resuming_with_another_config_names_the_fields(train_until_model, tmp_path):
  """A PreciseCoder run with progress, rerun with configs/grpo.py: refused, config kept."""
  run = tmp_path / "run"
  run.mkdir()
  cfg = config_lib.load_file(f"{CONFIG}:tiny")
  (run / "config.json").write_text(cfg.to_json())
  (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")
  grpo = CONFIG.replace("precisecoder.py", "grpo.py")
  code, err, loaded = train_until_model(f"--config={grpo}:tiny", f"--workdir={run}")
  assert code == 2 and not loaded and len(err.strip().splitlines()) == 1
  assert (
    f"{run / 'config.json'} was written with another config (rl.advantage: 'gdpo' -> "
    "'grpo'; rl.reward: 'r_lambda' -> 'unit')"
  ) in err
  assert json.loads((run / "config.json").read_text())["rl"]["reward"] == "r_lambda"
  # A longer budget, or other execution options, resume.
  code, _, loaded = train_until_model(
    f"--config={CONFIG}:tiny",
    f"--workdir={run}",
    "--config.train.steps=9",
    "--config.model.remat=full",
  )
  assert code is None and len(loaded) == 1


def test_a_run_that_trained_nothing_does_not_bind_its_workdir(train_until_model, tmp_path):
  """It failed before its first step (here: at the model): the corrected rerun takes over."""
  run = tmp_path / "run"
  code, _, _ = train_until_model(f"--config={CONFIG}:tiny", f"--workdir={run}")
  assert code is None and json.loads((run / "config.json").read_text())["rl"]["lam"] != 0.5
  code, _, loaded = train_until_model(
    f"--config={CONFIG}:tiny", f"--workdir={run}", "--config.rl.lam=0.5"
  )
  assert code is None and len(loaded) == 2
  assert json.loads((run / "config.json").read_text())["rl"]["lam"] == 0.5


@pytest.mark.parametrize(
  "content, message",
  [
    ("", "no tasks (the file is empty)"),
    ('{"task_id": "x", "buggy_code": "a"\n', ":1: invalid JSON"),
    ('{"task_id": "x"}\n', ":1 (x): missing field 'buggy_code'"),
  ],
)
def test_unusable_task_files_are_one_line_before_any_model_loads(train, tmp_path, content, message):
  (tmp_path / "tasks.jsonl").write_text(content)
  code, err, ran = train(
    f"--config={CONFIG}:tiny",
    f"--workdir={tmp_path / 'run'}",
    f"--config.data.task_file={tmp_path / 'tasks.jsonl'}",
  )
  assert code == 2 and not ran and len(err.strip().splitlines()) == 1
  assert (
    err.startswith(f"precisecoder train: error: config.data.task_file: {tmp_path / 'tasks.jsonl'}")
    and message in err
  )


def test_a_step_the_machine_cannot_hold_is_refused_before_the_model_loads(
  train_until_model, tmp_path
):
  code, err, loaded = train_until_model(
    f"--config={CONFIG}:tiny", f"--workdir={tmp_path}", f"--config.rl.group_size={10**9}"
  )
  assert code == 2 and not loaded and len(err.strip().splitlines()) == 1
  assert err.startswith(
    "precisecoder train: error: a rollout chunk of 1 prompt(s) (config.rl.prompts_per_step 2 / "
    "rl.rollout_chunks 2) x rl.group_size 1000000000 x rl.max_new_tokens 16 needs at least "
  )
  assert "(lower them, or raise config.rl.rollout_chunks)" in err


def test_paths_relative_to_where_it_runs(train_until_model, tmp_path, monkeypatch):
  import shutil

  monkeypatch.chdir(tmp_path)
  (tmp_path / "configs").mkdir()
  shutil.copy(CONFIG, "configs/precisecoder.py")
  from precisecoder.data import generator
  from precisecoder.tasks import write_tasks

  write_tasks("tasks.jsonl", generator.make_tasks("train", "easy", 2, seed=0))
  code, err, loaded = train_until_model(
    "--config=configs/precisecoder.py:tiny",
    "--workdir=runs/a",
    "--config.data.task_file=tasks.jsonl",
    "--config.train.checkpoint_dir=checkpoints/a",
  )
  assert code is None and len(loaded) == 1, err
  assert (tmp_path / "runs" / "a" / "config.json").exists()
  assert (tmp_path / "checkpoints" / "a").is_dir()


def test_ctrl_c_saves_the_step_prints_one_line_and_exits_130(tmp_path, monkeypatch, capsys):
  """SIGINT behaves like SIGTERM: a checkpoint of the step under way, then exit 130 with one
  line and no traceback."""
  import os
  import signal
  import threading
  import time
  from precisecoder.train import metrics

  def ctrl_c_after_first_step():
    while not metrics.read_metrics(tmp_path / "metrics.jsonl"):
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)

  before = signal.getsignal(signal.SIGINT)  # SIG_IGN where the suite runs in the background
  threading.Thread(target=ctrl_c_after_first_step, daemon=True).start()
  code, err, _ = _caller(monkeypatch, capsys, [])(
    f"--config={CONFIG}:tiny",
    f"--workdir={tmp_path}",
    "--config.train.steps=50",
    "--config.train.checkpoint_every=100",
    "--config.train.eval_every=0",
  )
  assert code == 130, err[-3000:]
  assert "Traceback" not in err and "KeyboardInterrupt" not in err
  done = metrics.last_step(tmp_path)
  assert 1 <= done < 50
  assert err.strip().splitlines()[-1] == (
    f"precisecoder train: interrupted: checkpoint of step {done} saved in {tmp_path}; rerun "
    "the same command to resume"
  )
  steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
  assert steps == [done]
  assert signal.getsignal(signal.SIGINT) is before


def _trained_workdir(run, steps):
  """A workdir whose run (the tiny preset, train.steps=`steps`) has a checkpoint of its last
  step, as the trainers leave it."""
  import numpy as np
  from precisecoder.train.checkpoint_writer import Checkpointer

  cfg = config_lib.load_file(f"{CONFIG}:tiny")
  cfg.train.steps = steps
  run.mkdir()
  (run / "config.json").write_text(cfg.to_json())
  (run / "metrics.jsonl").write_text(
    "".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in range(1, steps + 1))
  )
  checkpointer = Checkpointer(run / "checkpoints", async_save=False)
  checkpointer.save(steps, {"w": np.zeros(2)}, {"count": np.zeros(())}, {"step": steps})
  checkpointer.close()


def test_a_finished_workdir_says_so_continues_with_more_steps_and_refuses_fewer(
  train_until_model, tmp_path
):
  run = tmp_path / "run"
  _trained_workdir(run, 3)
  args = (f"--config={CONFIG}:tiny", f"--workdir={run}", "--config.train.report=false")
  code, err, loaded = train_until_model(*args)
  assert code == 0 and not loaded, err  # nothing loaded, nothing trained
  assert f"--workdir={run}: finished at step 3; nothing to train" in train_until_model.out
  code, err, loaded = train_until_model(*args, "--config.train.steps=2")
  assert code == 2 and not loaded and len(err.strip().splitlines()) == 1
  assert err.startswith(
    f"precisecoder train: error: --config.train.steps=2: --workdir={run} has "
    "trained 3 steps already; a run cannot be shortened"
  )
  assert json.loads((run / "config.json").read_text())["train"]["steps"] == 3
  code, _, loaded = train_until_model(*args, "--config.train.steps=5")
  assert code is None and len(loaded) == 1  # on to the model: it trains steps 4 and 5
  assert json.loads((run / "config.json").read_text())["train"]["steps"] == 5
