"""The results layer: what a run, a step and a harvest return, and how they are shown and exported."""
