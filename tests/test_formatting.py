import pytest

from torchperf_tui.core.formatting import format_bytes, format_count, format_flops, format_ms, format_number


class NA:
    def __str__(self):
        return "n/a (not supported)"


@pytest.mark.parametrize("value, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (3 * 1024**3, "3.0 GiB"), (None, "n/a"),
    (NA(), "n/a (not supported)"),
])
def test_bytes(value, text):
    assert format_bytes(value) == text


def test_counts_flops_ms_numbers():
    assert format_count(11_689_512) == "11.7 M"
    assert format_count(999) == "999"
    assert format_count(1.82e9, "MACs") == "1.82 GMACs"
    assert format_flops(3.64e9) == "3.64 GFLOPs"
    assert format_flops(512) == "512 FLOPs"
    assert format_ms(12.3456) == "12.35 ms"
    assert format_ms(130.4) == "130 ms"
    assert format_ms(-74.87) == "-74.87 ms" and format_ms(-0.25) == "-250 µs"  # unit by size, not sign
    assert format_ms(0.25) == "250 µs"
    assert format_ms(2500) == "2.50 s"
    assert format_number(71.4, "°C") == "71 °C"
    assert format_number(15.83, digits=1) == "15.8"
    assert format_ms(NA()) == "n/a (not supported)"


def test_bytes_in_the_unit_of_another_value():
    assert format_bytes(800 * 1024**2, like=2 * 1024**3) == "0.8 GiB"
    assert format_bytes(412 * 1024**2) == "412.0 MiB"


def test_one_shape_formatter():
    """A shape reads one way everywhere ('1x3x224x224'), written in one function: no hand-written join of a
    shape's dimensions anywhere else in the package, its benchmark scripts or its other scripts."""
    import pathlib
    import re

    import torchperf_tui
    from torchperf_tui.core.formatting import format_shape

    assert format_shape((1, 3, 224, 224)) == "1x3x224x224" and format_shape([7]) == "7" and format_shape(()) == ""
    package = pathlib.Path(torchperf_tui.__file__).parent
    repository = package.parents[1]
    sources = sorted(package.rglob("*.py")) + sorted((repository / "bench").glob("*.py")) + sorted(
        (repository / "scripts").glob("*.py"))
    joins = [f"{path.relative_to(repository)}:{number}" for path in sources
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"""["'][x×]["']\.join""", line)]
    assert joins == ["tui/torchperf_tui/core/formatting.py:" + str(next(n for n, line in enumerate(
        (package / "core/formatting.py").read_text(encoding="utf-8").splitlines(), 1) if '"x".join' in line))]


def test_number_checks_and_text():
    """One check per meaning: a real number (not a bool, an NA or None); a finite number above zero (a peak,
    a divisor); a number in its format, or what stands for it."""
    from torchperf_tui.core.formatting import is_number, is_positive_number, number_text

    assert is_number(0) and is_number(-1.5) and not is_number(True) and not is_number(None) and not is_number(NA())
    assert is_positive_number(2) and not is_positive_number(0) and not is_positive_number(float("inf"))
    assert not is_positive_number(float("nan")) and not is_positive_number(False)
    assert number_text(1.234, ".1f", " ms") == "1.2 ms" and number_text(None, ".1f") == "n/a"
    assert number_text(NA(), ".1f") == "n/a (not supported)" and number_text(NA(), ".1f", na="n/a") == "n/a"


def test_one_unsupported_mark():
    """A percentile the samples cannot support is marked one way: '?', styled where the text is markup."""
    from torchperf_tui.core.formatting import format_percentile, unsupported_mark

    assert unsupported_mark(True) == "" and unsupported_mark(True, "$warning") == ""
    assert unsupported_mark(False) == "?" and unsupported_mark(False, "$warning") == "[$warning]?[/]"
    assert format_percentile(12.0, 0.99, 50) == "12.00 ms?" and format_percentile(12.0, 0.5, 50) == "12.00 ms"


def test_a_compute_rate_is_in_tflops_and_an_integer_one_in_gops_where_small():
    from torchperf_tui.core.formatting import compute_rate_text

    assert compute_rate_text(45.1e9) == "0.05 TFLOP/s"  # as float ceilings have always been said
    assert compute_rate_text(1.3e9, integer=True) == "1.3 GOP/s"  # an int8 rate a CPU reaches: not '0.00'
    assert compute_rate_text(2.5e14, integer=True) == "250.00 TOP/s"
