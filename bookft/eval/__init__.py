"""eval."""
