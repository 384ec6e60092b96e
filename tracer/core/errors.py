"""The one exception type for problems a user can cause and fix; the CLI prints it as one line, exit 2."""


class UserError(Exception):
    """Bad input or a missing prerequisite: the message says what is wrong and what to do."""

    exit_code = 2
