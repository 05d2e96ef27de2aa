"""Files on disk: crash-safe writes, sessions, the archive, offloaded results, settings, secrets."""
