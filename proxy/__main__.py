"""``python -m proxy ...`` is the same as the ``veracity`` command."""

import sys

from proxy.cli import main

sys.exit(main())
