"""The ``sparkafka`` command line: ``main``, the entry point of ``sparkafka`` and ``python -m sparkafka.cli``.

- ``cli.parser``: ``build_parser``, every command's options and help;
- ``cli.commands``: what each command does, one handler per command; a handler imports the client layer,
  PySpark or ``sparkafka.local`` only when it runs, so importing this package loads none of them;
- beside them, what single commands use: ``cli.connection`` (``--bootstrap-servers``, ``--command-config``
  and the first contact), ``cli.lag_view`` (``lag``'s table, watch and plot), ``cli.topics`` and
  ``cli.acls`` (those commands' Admin API calls and rendering).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

# Importable from here as before (tests import them); a test replacing _settings patches cli.commands,
# where the handlers look it up.
from sparkafka.cli.commands import _operation_s as _operation_s
from sparkafka.cli.commands import _settings as _settings
from sparkafka.cli.commands import version_text
from sparkafka.cli.parser import build_parser

__all__ = ["build_parser", "main", "version_text"]


def main(argv: Sequence[str] | None = None) -> int:
    """The ``sparkafka`` command: parse ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    from sparkafka.client.log import librdkafka_lines

    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    with librdkafka_lines(shown=args.verbose):  # a command's own sentence says what failed
        return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
