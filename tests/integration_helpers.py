"""Helpers for tests/integrations: small task sets, completions that score differently, and
reward servers (`precisecoder serve` subprocesses on loopback, ephemeral ports)."""

import contextlib
import json
import os
import pathlib
import selectors
import signal
import subprocess
import sys
import urllib.request

from precisecoder import tasks as tasks_lib
from precisecoder.data import generator

STARTUP_TIMEOUT_S = 180  # a loaded 2-core host is slow to import and start a pool


def make_task_set():
  """Four buggy tasks and one clean program."""
  return generator.make_tasks("validation", "easy", 4, seed=3) + generator.make_clean_tasks(
    "validation", 1, seed=3
  )


def write_task_file(folder, task_list):
  path = pathlib.Path(folder) / "tasks.jsonl"
  tasks_lib.write_tasks(path, task_list)
  return path


def completions_for(task):
  """Answers that score differently: the reference fix, thinking + the buggy code unchanged,
  the fix plus an edited line (over-edit), and prose that does not compile."""
  fix_lines = task.gt_solution.splitlines()
  over_edit = "\n".join(["# reviewed", *fix_lines])
  return [
    f"Here is the fix:\n```python\n{task.gt_solution}\n```",
    f"<think>maybe the loop</think>\n```python\n{task.buggy_code}\n```",
    f"```python\n{over_edit}\n```",
    "I cannot find a bug in this code.",
  ]


def rows_for(task_set):
  """(task ids, completions): every task's answers, a group per task as trainers batch them."""
  ids, completions = [], []
  for task in task_set:
    for completion in completions_for(task):
      ids.append(task.task_id)
      completions.append(completion)
  return ids, completions


def http(url, payload=None, token=None, timeout=120):
  """(status, JSON body) of a GET (payload None) or POST."""
  data = None if payload is None else json.dumps(payload).encode()
  request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
  request.add_header("Content-Type", "application/json")
  if token:
    request.add_header("Authorization", f"Bearer {token}")
  try:
    with urllib.request.urlopen(request, timeout=timeout) as response:
      return response.status, json.loads(response.read())
  except urllib.error.HTTPError as e:
    return e.code, json.loads(e.read() or b"null")


@contextlib.contextmanager
def reward_server(task_file, *args, env=None, log=None):
  """A `precisecoder serve` subprocess on 127.0.0.1, any free port; yields (url, process).
  The URL is read from the line it prints once listening; stopped with SIGTERM (exit 0)."""
  command = [
    sys.executable,
    "-m",
    "precisecoder.cli",
    "serve",
    "--tasks",
    str(task_file),
    "--port",
    "0",
    "--workers",
    "1",
    *args,
  ]
  log = pathlib.Path(log or os.devnull)
  with open(log, "w") as stderr:
    process = subprocess.Popen(
      command, stdout=subprocess.PIPE, stderr=stderr, text=True, env={**os.environ, **(env or {})}
    )
  try:
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    if not selector.select(STARTUP_TIMEOUT_S):
      raise AssertionError(f"serve printed nothing in {STARTUP_TIMEOUT_S} s")
    line = process.stdout.readline()
    assert "listening on http://" in line, (line, log.read_text() if log.exists() else "")
    url = line.split("listening on ", 1)[1].split()[0]
    status, _ = http(url + "/health", timeout=STARTUP_TIMEOUT_S)
    assert status == 200
    yield url, process
  finally:
    if process.poll() is None:
      process.send_signal(signal.SIGTERM)
      try:
        process.wait(timeout=120)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def score_command(folder, task_file, ids, completions, *flags):
  """`precisecoder score` of these completions: its score records, in order."""
  from precisecoder import cli  # pylint: disable=import-outside-toplevel

  folder = pathlib.Path(folder)
  predictions = folder / "predictions.jsonl"
  with open(predictions, "w") as f:
    for k, (task_id, completion) in enumerate(zip(ids, completions)):
      f.write(json.dumps({"task_id": task_id, "sample": k, "completion": completion}) + "\n")
  output = folder / "scores.jsonl"
  status = cli.main(
    [
      "score",
      "--tasks",
      str(task_file),
      "--predictions",
      str(predictions),
      "--output",
      str(output),
      "--workers",
      "1",
      "--json",
      *flags,
    ]
  )
  assert status == 0, status
  return [json.loads(line) for line in output.read_text().splitlines()]


def term_of_record(record, term):
  """A reward term as the trainers get it, from a score record (null on clean tasks: 0)."""
  key = {"r_lambda": "reward"}.get(term, term)
  value = record[key]
  return 0.0 if value is None else float(value)


class DownBackend:
  """A scoring backend whose infrastructure is down: every batch raises."""

  def results(self, items):
    raise ConnectionError("pool down")

  def close(self):
    pass


def share_backend(backend):
  """Makes `backend` the process's shared scoring service for the default settings (what the
  adapters use when given no workers, slack, PDB mode or servers); returns that service."""
  from precisecoder.integrations import service  # pylint: disable=import-outside-toplevel

  shared = service.ScoringService(backend)
  service._shared[(None, None, False, ())] = shared  # pylint: disable=protected-access
  return shared
