"""The ``veracity`` command line: ``serve``, ``eval``, ``cases``, ``verify``, ``review``."""

__all__ = ["main", "serve", "evaluation", "cases"]
