"""``python -m lmms_genbench.cli``: the ``lmms-genbench`` command."""

import sys

from . import main

sys.exit(main())
