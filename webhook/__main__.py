"""``python -m webhook`` runs the ``gpu-admission`` command line."""

import sys

from webhook.cli.main import main

sys.exit(main())
