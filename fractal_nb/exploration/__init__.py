"""The facade: ``Exploration`` and what a person calls on it (docs/architecture.md, "Layers")."""
