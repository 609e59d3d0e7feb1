"""``python -m sparkafka.cli``: the ``sparkafka`` command."""

import sys

from sparkafka.cli import main

sys.exit(main())
