"""``python -m kafkawire.cli``."""
import sys

from kafkawire.cli.main import main

sys.exit(main())
