"""`precisecoder serve` as a process: loopback by default, SIGTERM drains the requests in
flight and exits 0, unusable flags and files exit 2 with one line."""

import concurrent.futures
import json
import signal
import socket
import subprocess
import sys
import threading

from integration_helpers import http, reward_server

from precisecoder import feedback, tasks

SLOW_TASK = {
  "task_id": "slow_inc",
  "buggy_code": "def inc(x):\n    return x\n",
  "gt_solution": "def inc(x):\n    return x + 1\n",
  "timeout_s": 30,
  "tests": {"kind": "call", "entry_point": "inc", "cases": [{"args": [1], "expected": 2}]},
}
SLOW_FIX = "import time\n\n\ndef inc(x):\n    time.sleep(2)\n    return x + 1\n"


def test_sigterm_finishes_the_request_in_flight_and_exits_zero(tmp_path):
  task_file = tmp_path / "slow.jsonl"
  task_file.write_text(json.dumps(SLOW_TASK) + "\n")
  with (
    reward_server(task_file, log=tmp_path / "serve.log") as (url, process),
    concurrent.futures.ThreadPoolExecutor(1) as executor,
  ):
    assert url.startswith("http://127.0.0.1:")  # loopback unless told
    pending = executor.submit(
      http, url + "/score", {"items": [{"task_id": "slow_inc", "program": SLOW_FIX}]}
    )
    waiting = threading.Event()
    for _ in range(30000):  # until the server holds the request (a condition, 300 s at most)
      if http(url + "/health")[1]["pending_items"] > 0 or pending.done():
        break
      waiting.wait(0.01)
    else:
      raise AssertionError("the server never held the request")
    process.send_signal(signal.SIGTERM)
    status, body = pending.result(120)
    assert status == 200 and body["results"][0]["unit"] == 1
    assert process.wait(120) == 0
  assert "Shutting down" in (tmp_path / "serve.log").read_text()


def test_feedback_runs_the_visible_tests_and_says_what_the_agent_would_hear(tmp_path):
  """Two of four call cases visible (--visible-tests 2): a wrong program hears those two,
  never the hidden ones; the fix hears nothing."""
  cases = [{"args": [x], "expected": x + 1} for x in (1, 2, 30, 40)]
  task = dict(SLOW_TASK, task_id="inc", tests=dict(SLOW_TASK["tests"], cases=cases))
  task_file = tmp_path / "inc.jsonl"
  task_file.write_text(json.dumps(task) + "\n")
  with reward_server(task_file, "--visible-tests", "2", log=tmp_path / "serve.log") as (url, _):
    status, body = http(url + "/feedback", {"task_id": "inc", "program": SLOW_TASK["buggy_code"]})
    assert status == 200
    assert (body["visible"], body["hidden"], body["failed"], body["passed"]) == (2, 2, 2, False)
    shown, _ = feedback.visible_tests(tasks.parse_task(task, "inc"), feedback.Visibility(2, 0.5))
    names = [f"inc({x})" for x in (1, 2, 30, 40)]
    assert "failed 2 of 2 visible tests" in body["message"]
    assert [n in body["message"] for n in names] == [n in {t.name for t in shown} for n in names]
    status, body = http(
      url + "/feedback", {"task_id": "inc", "completion": f"```python\n{task['gt_solution']}```"}
    )
    assert status == 200 and body["passed"] and body["message"] == ""


def _serve(*args):
  return subprocess.run(
    [sys.executable, "-m", "precisecoder.cli", "serve", *args],
    capture_output=True,
    text=True,
    timeout=300,
  )


def test_unusable_task_file_token_file_or_address_exit_2(tmp_path):
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"task_id": "x"}\n')
  result = _serve("--tasks", str(bad), "--port", "0")
  assert result.returncode == 2 and "bad.jsonl:1" in result.stderr
  good = tmp_path / "good.jsonl"
  good.write_text(json.dumps(SLOW_TASK) + "\n")
  result = _serve("--tasks", str(good), "--port", "0", "--token-file", str(tmp_path / "none"))
  assert result.returncode == 2 and "--token-file" in result.stderr
  with socket.create_server(("127.0.0.1", 0)) as taken:
    port = taken.getsockname()[1]
    result = _serve("--tasks", str(good), "--port", str(port))
  assert result.returncode == 2 and f"--port {port}: cannot listen" in result.stderr
  assert len(result.stderr.strip().splitlines()) == 1
