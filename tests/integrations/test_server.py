"""The reward server's app on uvicorn in a thread (loopback, an ephemeral port): fields named
in 4xx answers, size and deadline limits, bearer tokens, concurrent requests batched, the
OpenRLHF payload, /feedback's seam, and results equal to `precisecoder score`."""

import concurrent.futures
import contextlib
import socket
import threading

import pytest
import uvicorn

from integration_helpers import (
  completions_for,
  http,
  make_task_set,
  rows_for,
  score_command,
  write_task_file,
)
from precisecoder import prompts, rewards, tasks as tasks_lib
from precisecoder.execution import ExecutionPool
from precisecoder.integrations import server as server_lib, service as service_lib


@contextlib.contextmanager
def running(app):
  """Serves `app` on 127.0.0.1:<free port> in a thread; yields its URL. Requests sent before
  uvicorn accepts wait in the socket's backlog: no start-up race."""
  sock = socket.create_server(("127.0.0.1", 0))
  server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
  thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
  finally:
    server.should_exit = True
    thread.join(120)
    sock.close()


@pytest.fixture(scope="module")
def task_set():
  return make_task_set()


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=1) as p:
    yield p


def _server(task_set, backend, **options):
  service = service_lib.ScoringService(backend)
  return server_lib.RewardServer(
    service,
    {t.task_id: t for t in task_set[:-1]},
    settings={"epsilon": None, "pdb_compat": False},
    **options,
  )


def test_score_equals_precisecoder_score_and_takes_tasks_inline(tmp_path, task_set, pool):
  task_file = write_task_file(tmp_path, task_set)
  ids, completions = rows_for(task_set)
  records = score_command(tmp_path, task_file, ids, completions)
  app = _server(task_set, service_lib.LocalBackend(pool=pool)).app
  items = [
    {"task_id": i, "completion": c, "sample": k} for k, (i, c) in enumerate(zip(ids, completions))
  ]
  inline = [tasks_lib.task_to_record(task_set[-1])]  # the server was not started with it
  with running(app) as url:
    status, body = http(url + "/score", {"items": items, "tasks": inline})
    assert status == 200 and body["results"] == records
    status, body = http(url + "/score", {"items": items, "tasks": inline, "terms": True})
    assert [{k: v for k, v in r.items() if k != "terms"} for r in body["results"]] == records
    assert all(set(r["terms"]) >= {"unit", "f1", "reward", "edit_cost"} for r in body["results"])
    status, body = http(url + "/score", {"items": items[-1:]})
    assert status == 422 and "unknown task" in body["error"]
    status, health = http(url + "/health")
    assert health["tasks"] == len(task_set) - 1 and health["pending_items"] == 0


@pytest.mark.parametrize(
  "payload,status,field",
  [
    ([1, 2], 422, "body"),
    ({"items": {}}, 422, "items: must be a list"),
    ({"items": [{"task_id": "nope", "program": "x"}]}, 422, "items[0].task_id"),
    ({"items": [{"task_id": 7, "program": "x"}]}, 422, "items[0].task_id"),
    ({"items": [{"task_id": "T0"}]}, 422, "items[0]: needs a string 'completion' or 'program'"),
    ({"items": [{"task_id": "T0", "program": "x", "sample": -1}]}, 422, "items[0].sample"),
    ({"items": [{"task_id": "T0", "program": "x", "sample": True}]}, 422, "items[0].sample"),
    ({"items": [], "lam": 2}, 422, "lam"),
    ({"items": [], "terms": 1}, 422, "terms"),
    ({"items": [], "tasks": [{"task_id": "z"}]}, 422, "tasks[0]"),
    ({"items": [{"task_id": "T0", "program": "x"}] * 5}, 413, "items: 5 items exceed"),
  ],
)
def test_bad_input_is_a_4xx_naming_the_field(task_set, payload, status, field):
  class Never:
    def results(self, items):
      raise AssertionError("nothing should be scored")

    def close(self):
      pass

  server = _server(task_set, Never(), max_items=4)
  server.tasks["T0"] = task_set[0]
  with running(server.app) as url:
    got, body = http(url + "/score", payload)
  assert got == status and field in body["error"], body


def test_body_limits_bad_json_and_tokens(task_set, pool):
  server = _server(
    task_set, service_lib.LocalBackend(pool=pool), token="s3cret", max_body_bytes=2048
  )
  item = {"task_id": task_set[0].task_id, "program": task_set[0].gt_solution}
  with running(server.app) as url:
    assert http(url + "/score", {"items": [item]})[0] == 401
    assert http(url + "/score", {"items": [item]}, token="wrong")[0] == 401
    assert http(url + "/health")[0] == 200  # open: clients read the settings from it
    status, body = http(url + "/score", {"items": [item]}, token="s3cret")
    assert status == 200 and body["results"][0]["unit"] == 1
    status, body = http(url + "/score", {"items": [item] * 40}, token="s3cret")
    assert status == 413 and "body" in body["error"]
    import urllib.request

    request = urllib.request.Request(
      url + "/score", data=b"{nope", method="POST", headers={"Authorization": "Bearer s3cret"}
    )
    with pytest.raises(urllib.error.HTTPError) as error:
      urllib.request.urlopen(request, timeout=60)
    assert error.value.code == 400
    status, body = http(url + "/get_reward", {"query": ["x"]}, token="s3cret")
    assert status == 422 and body["error"].startswith("prompts")


class Gate:
  """A backend that holds its first batch until released, and counts batches."""

  def __init__(self):
    self.sizes, self.entered, self.release = [], threading.Event(), threading.Event()

  def results(self, items):
    self.sizes.append(len(items))
    self.entered.set()
    assert self.release.wait(120)
    return [
      {
        "task_id": i.task.task_id,
        "sample": i.sample,
        "unit": 1,
        "reward": 1.0,
        "error": None,
        "terms": {k: 1.0 for k in rewards.ARRAY_KEYS},
      }
      for i in items
    ]

  def close(self):
    pass


def test_concurrent_requests_are_scored_as_one_batch(task_set):
  gate = Gate()
  server = _server(task_set, gate)
  item = {"task_id": task_set[0].task_id, "program": "x = 1"}
  with running(server.app) as url, concurrent.futures.ThreadPoolExecutor(9) as executor:
    first = executor.submit(http, url + "/score", {"items": [item]})
    assert gate.entered.wait(120)
    later = [
      executor.submit(http, url + "/score", {"items": [dict(item, program=f"x = {k + 10}")] * 2})
      for k in range(8)
    ]
    # Wait until all eight are queued in the service (a condition, not a sleep).
    deadline = threading.Event()
    for _ in range(12000):  # 120 s at most
      if server.service.pending_items() >= 1 + 16:
        break
      deadline.wait(0.01)
    else:
      raise AssertionError(f"{server.service.pending_items()} items queued, not 17")
    gate.release.set()
    assert first.result(120)[0] == 200 and all(f.result(120)[0] == 200 for f in later)
  assert gate.sizes == [1, 8]  # eight requests, one batch (their two items are one pair)


def test_a_request_past_its_deadline_gets_504_and_its_batch_is_kept(task_set):
  gate = Gate()
  server = _server(task_set, gate, deadline_s=0.2)
  item = {"task_id": task_set[0].task_id, "program": "x = 1"}
  with running(server.app) as url:
    status, body = http(url + "/score", {"items": [item]})
    assert status == 504 and "deadline" in body["error"]
    gate.release.set()
    server.deadline_s = 120
    status, body = http(url + "/score", {"items": [item]})
    assert status == 200 and body["results"][0]["unit"] == 1
  assert gate.sizes == [1]  # the retry was answered from the finished batch


def test_get_reward_takes_openrlhf_payload(task_set, pool):
  server = _server(task_set, service_lib.LocalBackend(pool=pool), reward="unit")
  task = task_set[0]
  prompt = f"<|im_start|>user\n{task.buggy_code}<|im_end|>\n<|im_start|>assistant\n"
  answers = completions_for(task)
  payload = {
    "query": [prompt + a + "<|im_end|>" for a in answers],
    "prompts": [prompt] * len(answers),
    "labels": [task.task_id] * len(answers),
  }
  with running(server.app) as url:
    status, body = http(url + "/get_reward", payload)
    assert status == 200
    assert body["rewards"] == [1.0, 0.0, 1.0, 0.0] == body["scores"]
    assert body["extra_logs"]["unit"] == body["rewards"]
    assert 0 < body["extra_logs"]["precision"][2] < 1
    bad = dict(payload, query=["something else"] + payload["query"][1:])
    status, body = http(url + "/get_reward", bad)
    assert status == 422 and body["error"].startswith("query[0]")


def test_feedback_answers_501_until_wired_and_calls_the_wired_function(task_set, pool):
  task = task_set[0]
  request = {"task_id": task.task_id, "completion": f"```python\n{task.gt_solution}\n```"}
  with running(_server(task_set, service_lib.LocalBackend(pool=pool)).app) as url:
    status, body = http(url + "/feedback", request)
  assert status == 501 and "feedback" in body["error"]
  calls = []

  def feedback(p, t, program):  # a stand-in for the agent's visible-test feedback
    calls.append((p, t.task_id, program))
    return {"visible": [], "message": "ok"}

  server = _server(task_set, service_lib.LocalBackend(pool=pool), feedback=feedback)
  with running(server.app) as url:
    status, body = http(url + "/feedback", request)
  assert status == 200 and body == {"task_id": task.task_id, "visible": [], "message": "ok"}
  assert calls == [(pool, task.task_id, prompts.extract_program(request["completion"]))]
