"""The public API is what ``fractal_nb.__all__`` lists, sorted, and every name resolves.

Covers: errors.py.
"""

from pathlib import Path

import fractal_nb


def test_all_is_sorted_and_complete() -> None:
    assert fractal_nb.__all__ == sorted(fractal_nb.__all__)
    public = {name for name in dir(fractal_nb) if not name.startswith("_")}  # names load on first use
    modules = {name for name in public if type(getattr(fractal_nb, name)).__name__ == "module"}
    assert set(fractal_nb.__all__) == public - modules


def test_errors_share_one_base() -> None:
    for name in fractal_nb.__all__:
        obj = getattr(fractal_nb, name)
        if name.endswith("Error"):
            assert issubclass(obj, fractal_nb.FractalError)


def public_names() -> list[str]:
    """Each name ``fractal_nb.__all__`` lists, and each public attribute of each class among them."""
    names = []
    for name in fractal_nb.__all__:
        obj = getattr(fractal_nb, name)
        names.append(name)
        if isinstance(obj, type):
            names += [f"{name}.{m}" for m in sorted(dir(obj)) if not m.startswith("_")]
    return names


def test_the_public_names_are_those_kept_in_public_api_txt() -> None:
    # Moving modules between folders changes no public name (docs/architecture.md, "Layers"):
    # a name added or removed is a decision, made by updating tests/public_api.txt with it.
    kept = (Path(__file__).parent / "public_api.txt").read_text(encoding="utf-8").split()
    assert public_names() == kept
