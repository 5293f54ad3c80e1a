"""The command line as a script for ``spark-submit``, which runs ``.py`` files only:

    SUBMIT=$(python -c 'import xroute.spark.submit as m; print(m.__file__)')
    spark-submit --master spark://host:7077 "$SUBMIT" pipeline -d defs.json -m in/ -o out/

Spark's own options (master, memory, ...) come from spark-submit; the rest is ``xroute``'s.
"""

from xroute.cli.app import main

if __name__ == "__main__":
    main()
