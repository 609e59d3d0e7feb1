r"""spark-submit entry point for sparkafka pipeline files.

spark-submit needs a Python file; this one runs the ``sparkafka`` CLI inside the driver spark-submit
starts, so the pipeline uses spark-submit's master, executors and shipped files, and prints what a local
``sparkafka run`` prints: its status lines, with Spark logging at WARN instead of spark-submit's INFO
(``--conf spark.log.level=INFO`` brings Spark's INFO lines back):

    spark-submit --master spark://HOST:7077 --py-files sparkafka-0.4.0.zip \
        examples/submit_pipeline.py run pipeline.toml

sparkafka ships as its wheel renamed to ``.zip`` (``cp sparkafka-0.4.0-py3-none-any.whl
sparkafka-0.4.0.zip``): PySpark puts only ``.zip``, ``.egg`` and ``.jar`` files of ``--py-files`` on the
executors' path, so a ``.whl`` imports on the driver and fails on the executors. See docs/deploy.md.
"""

import sys

from sparkafka.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
