"""placeholder (issue 8)."""
