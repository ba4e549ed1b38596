"""Sessions: the events, the session logs that store them, and the one reader of a log."""
