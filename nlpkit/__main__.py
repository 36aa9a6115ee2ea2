"""`python -m nlpkit`; the guard keeps spawned worker processes (Dask, multiprocessing) from running the CLI."""

from nlpkit.cli.main import main

if __name__ == "__main__":
    main()
