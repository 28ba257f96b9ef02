"""The engine: seed, work (parallel workers on the store's queue) and harvest."""
