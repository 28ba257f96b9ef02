"""The shell's face: ``fractal-nb`` and its inspection commands."""
