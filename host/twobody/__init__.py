"""Two-body statistics (see api.py)."""
from .api import *  # noqa: F401,F403
