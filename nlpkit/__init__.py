"""nlpkit: a command-line toolkit of NLP utilities with a small numpy core."""

__version__ = "0.1.0"
