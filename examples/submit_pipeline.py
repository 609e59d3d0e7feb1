"""spark-submit entry point for sparkafka pipeline files.

spark-submit needs a Python file; this one runs the ``sparkafka`` CLI inside the driver spark-submit
starts, so the pipeline uses spark-submit's master, executors and shipped files:

    spark-submit --master spark://HOST:7077 --py-files sparkafka-0.1.0-py3-none-any.whl \\
        examples/submit_pipeline.py run pipeline.toml

See docs/deploy.md.
"""

import sys

from sparkafka.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
