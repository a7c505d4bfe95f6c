"""`python -m launch`: the same as `paddle-launch`."""
import sys

from .cli import main

sys.exit(main())
