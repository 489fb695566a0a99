"""cpu_time: a process tree's CPU seconds count its reaped children and its live ones."""

import importlib.util
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
  "benchmarks_cpu_time", ROOT / "benchmarks/cpu_time.py"
)
cpu_time = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_time)

# A child that spins until it has used 0.3 s of CPU (its own clock, not the wall's), says so,
# then waits for its stdin to close.
_BURN = (
  "import sys, time\nwhile time.process_time() < 0.3: pass\n"
  "print('burnt', flush=True)\nsys.stdin.read()\n"
)


def test_tree_cpu_counts_live_and_reaped_children():
  me = os.getpid()
  before_tree, before_own = cpu_time.tree_cpu(me), cpu_time.own_cpu(me)
  child = subprocess.Popen(
    [sys.executable, "-c", _BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
  )
  assert child.stdout.readline().strip() == "burnt"
  assert cpu_time.tree_cpu(me) - before_tree >= 0.25  # the live child, through /proc
  assert cpu_time.own_cpu(child.pid) >= 0.25
  child.stdin.close()
  child.wait()
  assert cpu_time.tree_cpu(me) - before_tree >= 0.25  # reaped: in this process's cutime
  assert cpu_time.own_cpu(me) - before_own < 0.25  # own excludes the child
  assert cpu_time.tree_cpu(child.pid) == 0.0  # gone
