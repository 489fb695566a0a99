"""Reward server overhead: the same batch scored through `precisecoder serve` by 1, 8 and 32
concurrent clients, side by side with in-process scoring (RewardScorer on an ExecutionPool).

The batch: --tasks generated `easy` tasks x 6 completions each (the reference fix, the buggy
code unchanged, the fix plus an inserted statement, the statement alone, the fix re-indented
with trailing blanks, prose), as a GRPO group would hold. Each measurement starts cold: a
fresh pool (in-process) or a fresh server process, warmed up on other tasks first, so that
no verdict is cached from an earlier turn.

  in-process  one RewardScorer.score_records call on the whole batch (the best case: one
              batch for the pool, no HTTP, no JSON);
  server, C   C client threads in this process, each sending its share of the batch as
              requests of --request-items items (a group per request by default) over a
              keep-alive connection; the server joins concurrent requests into batches;
  whole batch one request of every item (what `RemoteScorer` sends a server per shard): the
              cost of HTTP and JSON alone, without smaller batches.

Prints per mode the wall time (median of --repeats turns, and range), items/s, request
latency p50/p99, the programs the sandbox ran (equal in every mode), and the CPU time of the
whole process tree during the scoring window (read from /proc: this process with its client
threads, the server, the pool workers and the runs they reaped), split into the
coordinating processes (in-process: this one, which diffs and scores; server: the server
process and this one's clients) and the sandbox (workers and runs). Overheads are against
in-process, paired by turn (median of the per-turn figures): wall, whole-tree CPU, and the
coordinating CPU beyond in-process's as a share of in-process's whole CPU -- the part the
server adds, since the sandbox runs the same programs (on a shared, loaded host wall time
and even the sandbox's CPU swing from turn to turn). Each server mode then sends the
same requests again: every result is cached, so that pass's coordinating CPU ("serving") is
what HTTP, JSON and the service cost alone, the steadiest figure of the server's overhead.
The goal is <= 10% at 32 clients.
Checks that every mode scored every item the same.

  python benchmarks/bench_serve.py [--tasks 48] [--workers 2] [--clients 1,8,32]
                                   [--request-items 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from precisecoder import predictions, rewards, tasks as tasks_lib
from precisecoder.data import generator
from precisecoder.execution import ExecutionPool
from cpu_time import own_cpu, tree_cpu
from results import add_record_flag, recorded


def _completions(task: tasks_lib.Task) -> list[str]:
  fix, bug = task.gt_solution.splitlines(), task.buggy_code.splitlines()
  statement = "    _checked = True"
  fence = "```python\n{}\n```"
  return [
    fence.format(task.gt_solution),
    fence.format(task.buggy_code),
    fence.format("\n".join(fix[:1] + [statement] + fix[1:])),
    fence.format("\n".join(bug[:1] + [statement] + bug[1:])),
    fence.format("\n".join(line + "  " for line in fix)),
    "I do not see a bug here.",
  ]


def _items(task_list: list[tasks_lib.Task]) -> list[dict]:
  return [
    {"task_id": t.task_id, "completion": c, "sample": k}
    for t in task_list
    for k, c in enumerate(_completions(t))
  ]


class _Window:
  """Wall seconds of a `with` block and CPU seconds of the whole process tree, and of the
  processes that coordinate the scoring (this one, and the server's own when `server_pid`):
  the rest is the sandbox, the pool workers and their runs."""

  def __init__(self, server_pid: int | None = None):
    self.server_pid = server_pid

  def _coordinating(self) -> float:
    own = time.process_time()
    return own + (own_cpu(self.server_pid) if self.server_pid else 0.0)

  def __enter__(self):
    self.cpu, self.coordinating = tree_cpu(os.getpid()), self._coordinating()
    self.wall = time.perf_counter()
    return self

  def __exit__(self, *exc):
    self.wall = time.perf_counter() - self.wall
    self.cpu = tree_cpu(os.getpid()) - self.cpu
    self.coordinating = self._coordinating() - self.coordinating


def _in_process(task_list, items, warm_items, workers: int) -> tuple[_Window, list]:
  table = {t.task_id: t for t in task_list}
  with ExecutionPool(workers=workers) as pool:
    scorer = rewards.RewardScorer(pool)
    _score(scorer, table, warm_items)
    before = scorer.stats()["programs_executed"]
    with _Window() as window:
      records = _score(scorer, table, items)
    window.executed, window.batches = scorer.stats()["programs_executed"] - before, 1
    window.serving = 0.0
    return window, records


def _score(scorer, table, items):
  resolved = [predictions.resolve(i) for i in items]
  return scorer.score_records(
    [table[i["task_id"]] for i in items],
    [p for p, _ in resolved],
    samples=[i["sample"] for i in items],
    errors=[e for _, e in resolved],
  )


class _Server:
  """`precisecoder serve` on 127.0.0.1, any free port."""

  def __init__(self, task_files: list[pathlib.Path], workers: int):
    command = [
      sys.executable,
      "-m",
      "precisecoder.cli",
      "serve",
      "--port",
      "0",
      "--workers",
      str(workers),
    ]
    for path in task_files:
      command += ["--tasks", str(path)]
    self.process = subprocess.Popen(
      command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    line = self.process.stdout.readline()
    if "listening on http://" not in line:
      raise RuntimeError(f"serve did not start: {line!r}")
    address = line.split("http://", 1)[1].split()[0]
    self.host, port = address.rsplit(":", 1)
    self.port = int(port)

  def post(self, connection: http.client.HTTPConnection, items: list[dict]) -> list[dict]:
    connection.request(
      "POST",
      "/score",
      body=json.dumps({"items": items}),
      headers={"Content-Type": "application/json"},
    )
    response = connection.getresponse()
    body = json.loads(response.read())
    if response.status != 200:
      raise RuntimeError(f"HTTP {response.status}: {body}")
    return body["results"]

  def counts(self) -> tuple[int, int]:
    """(programs the sandbox ran, batches the service scored) so far."""
    connection = self.connect()
    connection.request("GET", "/health")
    health = json.loads(connection.getresponse().read())
    connection.close()
    return health["scorer"]["programs_executed"], health["service"].get("batches", 0)

  def connect(self) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(self.host, self.port, timeout=600)

  def close(self) -> None:
    self.process.send_signal(signal.SIGTERM)
    self.process.wait(120)


def _through_server(
  task_files, items, warm_items, workers: int, clients: int, request_items: int
) -> tuple[_Window, list[float], list]:
  server = _Server(task_files, workers)
  try:
    warm = server.connect()
    server.post(warm, warm_items)
    warm.close()
    requests = [items[i : i + request_items] for i in range(0, len(items), request_items)]
    shares = [requests[c::clients] for c in range(clients)]

    def client(share):
      connection, out = server.connect(), []
      for request in share:
        t0 = time.perf_counter()
        results = server.post(connection, request)
        out.append((time.perf_counter() - t0, request, results))
      connection.close()
      return out

    executed, batches = server.counts()
    with (
      concurrent.futures.ThreadPoolExecutor(clients) as executor,
      _Window(server.process.pid) as window,
    ):
      done = list(executor.map(client, shares))
    now = server.counts()
    window.executed, window.batches = now[0] - executed, now[1] - batches
    # The same requests again: every result is cached, so this pass costs what serving alone
    # costs (HTTP, JSON, the service), with no sandbox and no diff to blur it.
    with (
      concurrent.futures.ThreadPoolExecutor(clients) as executor,
      _Window(server.process.pid) as again,
    ):
      list(executor.map(client, shares))
    window.serving = again.coordinating
  finally:
    server.close()
  latencies = [lat for share in done for lat, _, _ in share]
  by_key = {(r["task_id"], r["sample"]): r for share in done for _, _, rs in share for r in rs}
  records = [by_key[i["task_id"], i["sample"]] for i in items]
  return window, latencies, records


def _percentile(values: list[float], q: float) -> float:
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tasks", type=int, default=48)
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--clients", default="1,8,32")
  parser.add_argument("--request-items", type=int, default=6)
  parser.add_argument("--repeats", type=int, default=3)
  add_record_flag(parser)
  args = parser.parse_args()
  clients = [int(c) for c in args.clients.split(",")]

  task_list = generator.make_tasks("test", "easy", args.tasks, seed=11)
  warm_tasks = generator.make_tasks("validation", "easy", 4, seed=12)
  items, warm_items = _items(task_list), _items(warm_tasks)
  folder = pathlib.Path(tempfile.mkdtemp(prefix="bench_serve_"))
  task_files = [folder / "tasks.jsonl", folder / "warm.jsonl"]
  tasks_lib.write_tasks(task_files[0], task_list)
  tasks_lib.write_tasks(task_files[1], warm_tasks)

  windows: dict[str, list[_Window]] = {"in-process": []}
  latencies: dict[str, list[float]] = {}
  reference = None
  mismatches = 0
  for turn in range(args.repeats):
    window, records = _in_process(task_list + warm_tasks, items, warm_items, args.workers)
    windows["in-process"].append(window)
    reference = reference or records
    mismatches += records != reference
    modes = [
      (f"server, {c} client{'s' if c > 1 else ''}", c, args.request_items) for c in clients
    ] + [("server, whole batch in one request", 1, len(items))]
    for name, c, request_items in modes:
      window, lats, records = _through_server(
        task_files, items, warm_items, args.workers, c, request_items
      )
      windows.setdefault(name, []).append(window)
      latencies.setdefault(name, []).extend(lats)
      mismatches += [{k: v for k, v in r.items() if k != "terms"} for r in records] != reference
    print(
      f"turn {turn + 1}/{args.repeats}: "
      + ", ".join(
        f"{k} {w[-1].wall:.2f} s wall, {w[-1].cpu:.2f} s CPU" for k, w in windows.items()
      ),
      flush=True,
    )
  _report(args, windows, latencies, len(items))
  print(
    f"score records differing from the first in-process turn: {mismatches} of "
    f"{args.repeats * (2 + len(clients))} runs (must be 0)"
  )


def _report(args, windows, latencies, n_items) -> None:
  base = windows["in-process"]

  def median(name, field):
    return statistics.median(getattr(w, field) for w in windows[name])

  def paired(name, extra):  # median over turns of extra(server turn, in-process turn)
    return f"{100 * statistics.median(extra(a, b) for a, b in zip(windows[name], base)):+.1f}%"

  print(
    f"\n{n_items} items ({args.tasks} tasks x 6), {args.workers} workers, requests of "
    f"{args.request_items} items, {args.repeats} turns; load average "
    f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
  )
  print(
    "| mode | wall s [min, max] | items/s | request p50 / p99 ms | programs run | batches "
    "| CPU s | of which coordinating | of which sandbox | serving CPU s | overhead: wall "
    "| CPU | coordinating | serving |"
  )
  print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
  for name, turns in windows.items():
    walls, lats = [w.wall for w in turns], latencies.get(name)
    latency = (
      f"{1e3 * _percentile(lats, 0.5):.0f} / {1e3 * _percentile(lats, 0.99):.0f}"
      if lats
      else "(one call)"
    )
    if name == "in-process":
      overheads = "- | - | - | -"
    else:
      overheads = " | ".join(
        [
          paired(name, lambda a, b: a.wall / b.wall - 1),
          paired(name, lambda a, b: a.cpu / b.cpu - 1),
          paired(name, lambda a, b: (a.coordinating - b.coordinating) / b.cpu),
          paired(name, lambda a, b: a.serving / b.cpu),
        ]
      )
    executed = sorted({w.executed for w in turns})
    print(
      f"| {name} | {median(name, 'wall'):.2f} [{min(walls):.2f}, {max(walls):.2f}] | "
      f"{n_items / median(name, 'wall'):.0f} | {latency} | "
      f"{'/'.join(map(str, executed))} | {median(name, 'batches'):.0f} | "
      f"{median(name, 'cpu'):.2f} | "
      f"{median(name, 'coordinating'):.2f} | "
      f"{statistics.median(w.cpu - w.coordinating for w in turns):.2f} | "
      f"{median(name, 'serving'):.2f} | {overheads} |"
    )


if __name__ == "__main__":
  main()
