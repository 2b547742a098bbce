"""pqindex."""
