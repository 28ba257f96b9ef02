"""The public API is what ``fractal_nb.__all__`` lists, sorted, and every name resolves."""

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
