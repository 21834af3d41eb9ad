"""The ``veracity`` command line: ``serve``, ``eval``, ``cases``, ``verify``, ``review``."""
