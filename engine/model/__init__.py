"""Messages, events and the context snapshot: plain data, no I/O."""
