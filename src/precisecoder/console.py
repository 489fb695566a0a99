"""What the console shows: this program's progress and results, not its libraries' chatter.

Orbax logs a dozen INFO lines per checkpoint read or write, JAX one INFO line per backend it
cannot start ("Unable to initialize backend 'tpu'"), and Orbax warns "Metadata file does not
exist" for every checkpoint written without its optional metadata file (ours: it reads them
fine). `quiet_libraries()` drops those on every command that loads JAX; warnings and errors of
libraries stay. `--verbose` (or PRECISECODER_LIBRARY_LOGS=1, which child processes inherit)
keeps everything.
"""

from __future__ import annotations

import logging
import os

LIBRARY_LOGS_ENV = "PRECISECODER_LIBRARY_LOGS"
# Where the chattering libraries live (a record's pathname).
_LIBRARIES = ("/orbax/", "/jax/", "/jaxlib/", "/etils/", "/grain/", "/flax/")
VERBOSE_HELP = f"show the libraries' INFO logs (Orbax, JAX) too; also {LIBRARY_LOGS_ENV}=1"
# Library warnings about nothing the user can or need act on.
_HARMLESS_WARNINGS = ("Metadata file does not exist",)


class QuietLibraries(logging.Filter):
  """Drops library records below WARNING, and the harmless warnings above."""

  def filter(self, record: logging.LogRecord) -> bool:
    if not any(part in record.pathname for part in _LIBRARIES):
      return True
    if record.levelno >= logging.ERROR:
      return True
    if record.levelno >= logging.WARNING:
      return not str(record.msg).startswith(_HARMLESS_WARNINGS)
    return False


def quiet_libraries(verbose: bool = False) -> None:
  """Installs `QuietLibraries` on the handlers that print (the root logger's, absl's) and on
  the loggers libraries log through; `verbose` turns it off here and in child processes.

  Call it after the command has set up its logging (`basicConfig`, absl's verbosity): a
  handler added later is not filtered.
  """
  if verbose:
    os.environ[LIBRARY_LOGS_ENV] = "1"
  if os.environ.get(LIBRARY_LOGS_ENV) == "1":
    return
  from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel

  # On handlers: libraries log through loggers of their own (jax._src...), whose records reach
  # the root's handlers without passing any other logger's filters. On the absl logger too:
  # Orbax logs through it, and absl's handler may not be the root's yet.
  targets = [
    *logging.getLogger().handlers,
    absl_logging.get_absl_handler(),
    logging.getLogger("absl"),
  ]
  for target in targets:
    if not any(isinstance(f, QuietLibraries) for f in target.filters):
      target.addFilter(QuietLibraries())
