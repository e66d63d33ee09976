"""User-facing errors.

A user error is an exception whose message is one line that names the file and the field
and says what to change.  ``parsim.cli`` prints it and exits with ``exit_code``; no traceback
reaches the user.  Programming errors stay ordinary exceptions.
"""


class ParsimError(Exception):
    """Base class of every error that is the user's to fix."""

    exit_code = 2


class InputError(ParsimError):
    """A bad file, field or flag (exit code 2)."""


class InfeasibleError(ParsimError):
    """A configuration that cannot run, e.g. micro-batches that do not divide the batch (exit 2)."""


class DoesNotFitError(ParsimError):
    """No candidate fits device memory (exit code 3)."""

    exit_code = 3


class RunError(ParsimError):
    """A training run that stopped on a fault it names: a disk that filled, a loss that is not
    finite, a rank that hung (exit code 1)."""

    exit_code = 1
