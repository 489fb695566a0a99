"""`precisecoder serve`: the reward server (integrations/server.py says what it answers).

  precisecoder serve --tasks T.jsonl [--tasks U.jsonl] [--host 127.0.0.1] [--port 8000] \
      [--workers N] [--lam 0.333] [--epsilon N] [--pdb-compat] [--token-file F] ...

Prints `precisecoder serve: listening on http://HOST:PORT` once it accepts connections
(`--port 0`: a free port, read back from that line). SIGTERM (or Ctrl-C) stops accepting,
lets the requests in flight get their results, closes the pool and exits 0. Exit 2 for
unusable task files, flags or address.
"""

from __future__ import annotations

import argparse
import functools
import os
import pathlib
import signal
import socket
import sys

from precisecoder import predictions
from precisecoder.commands import checks, flags
from precisecoder.commands.checks import InputError
from precisecoder.integrations import adapters
from precisecoder.integrations.client import TOKEN_ENV


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    "--tasks",
    required=True,
    action="append",
    help="task file served by task_id (repeat for several)",
  )
  parser.add_argument(
    "--host",
    default="127.0.0.1",
    help="address to listen on (default 127.0.0.1: this machine only)",
  )
  parser.add_argument(
    "--port",
    type=checks.non_negative_int,
    default=8000,
    help="port (0: any free port, printed on start)",
  )
  flags.add_scoring(parser)  # --lam: for requests that name none
  parser.add_argument(
    "--reward",
    default="r_lambda",
    choices=tuple(adapters.TERMS),
    help="the term /get_reward (OpenRLHF) returns as rewards",
  )
  parser.add_argument(
    "--token-file",
    default=None,
    help=f"file holding a bearer token every request must carry (default: "
    f"${TOKEN_ENV} if set, else no auth); /health stays open",
  )
  parser.add_argument(
    "--max-items", type=checks.positive_int, default=4096, help="items per request (more: HTTP 413)"
  )
  parser.add_argument(
    "--max-request-mb",
    type=checks.positive_float,
    default=64.0,
    help="request body size limit in MiB (more: HTTP 413)",
  )
  parser.add_argument(
    "--deadline-s",
    type=checks.positive_float,
    default=600.0,
    help="a request still waiting for results after this long gets HTTP 504",
  )
  parser.add_argument(
    "--max-program-lines",
    type=checks.positive_int,
    default=predictions.MAX_PROGRAM_LINES,
    help="a longer program scores 0 with the reason in 'error' (as score)",
  )
  flags.add_visible_tests(parser)  # POST /feedback


def _token(path: str | None) -> str | None:
  if path is None:
    return os.environ.get(TOKEN_ENV) or None
  try:
    token = pathlib.Path(path).read_text().strip()
  except OSError as e:
    raise InputError(f"--token-file {path}: {e.strerror or e}") from None
  if not token:
    raise InputError(f"--token-file {path}: the file is empty")
  return token


def _listen(host: str, port: int) -> socket.socket:
  family = socket.AF_INET6 if ":" in host else socket.AF_INET
  try:
    return socket.create_server((host, port), family=family)
  except OSError as e:
    raise InputError(f"--host {host} --port {port}: cannot listen: {e.strerror or e}") from None


def _stop(signum, frame) -> None:  # pylint: disable=unused-argument
  raise SystemExit(0)


def main(args: argparse.Namespace) -> int:
  from precisecoder.tasks import TaskError  # pylint: disable=import-outside-toplevel

  try:
    try:
      tasks = adapters.task_table(",".join(args.tasks))
    except TaskError as e:
      raise InputError(str(e)) from None
    token = _token(args.token_file)
    sock = _listen(args.host, args.port)
  except InputError as e:
    print(f"precisecoder serve: error: {e}", file=sys.stderr)
    return 2
  # Our SIGTERM handler, set before the pool's own: uvicorn drains the requests in flight on
  # SIGTERM, then raises it again, and this turns it into a clean exit 0.
  signal.signal(signal.SIGTERM, _stop)
  # pylint: disable=import-outside-toplevel  (the web stack loads only once inputs are good)
  import uvicorn
  from precisecoder import feedback as feedback_lib
  from precisecoder.integrations import server as server_lib, service as service_lib

  backend = service_lib.LocalBackend(
    args.workers, epsilon=args.epsilon, pdb_compat=args.pdb_compat, lam=args.lam, python=args.python
  )
  service = service_lib.ScoringService(backend, max_batch_items=max(8192, args.max_items))
  reward_server = server_lib.RewardServer(
    service,
    tasks,
    settings=backend.settings(),
    lam=args.lam,
    reward=args.reward,
    token=token,
    max_items=args.max_items,
    max_body_bytes=int(args.max_request_mb * (1 << 20)),
    deadline_s=args.deadline_s,
    max_program_lines=args.max_program_lines,
    feedback=functools.partial(
      feedback_lib.as_json,
      visibility=feedback_lib.Visibility(args.visible_tests, args.visible_fraction),
    ),
  )
  config = uvicorn.Config(
    reward_server.app,
    log_level="info",
    access_log=False,
    lifespan="on",
    timeout_graceful_shutdown=int(args.deadline_s) + 30,
  )
  host, port = sock.getsockname()[:2]
  shown = f"[{host}]" if ":" in host else host
  print(
    f"precisecoder serve: listening on http://{shown}:{port} ({len(tasks)} tasks, "
    f"{backend.pool.num_workers} workers{', bearer token' if token else ''})",
    flush=True,
  )
  try:
    uvicorn.Server(config).run(sockets=[sock])
  except KeyboardInterrupt:
    return 130
  finally:
    service.close()
    sock.close()
  return 0
