"""``webhook.core.counts.parse_count``: the one reading of a count written as text (issue 25, point 4).

A count is ASCII digits, at most ``cap``; ``padded`` and ``signs`` add only what the writer's own
parser takes. Everything ``str.isdigit()`` or ``int()`` would take beyond that is ``None``, never an
exception (the readers it serves are tested through the engine in ``test_count_readers.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.counts import parse_count

CAP = 4096


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("4", 4, id="ascii-digit"),
    pytest.param("0", 0, id="zero"),
    pytest.param("4096", 4096, id="at-cap"),
    pytest.param("04", 4, id="leading-zero"),
    pytest.param("0" * 5000 + "4", 4, id="many-leading-zeros"),
    pytest.param("4097", None, id="over-cap"),
    pytest.param("99999", None, id="more-digits-than-cap"),
    pytest.param("9" * 5000, None, id="huge-past-int-limit"),
    pytest.param("\u00b2", None, id="superscript-two"),
    pytest.param("\u2464", None, id="circled-five"),
    pytest.param("\u0663", None, id="arabic-indic-three"),
    pytest.param("\u0661\u0662", None, id="arabic-indic-twelve"),
    pytest.param("\uff11\uff12", None, id="fullwidth-twelve"),
    pytest.param("\u07c4", None, id="nko-four"),
    pytest.param("\U0001d7d2", None, id="mathematical-bold-four"),
    pytest.param("4\u00b2", None, id="ascii-then-superscript"),
    pytest.param("4\u0301", None, id="combining-mark"),
    pytest.param("\u202e4", None, id="rtl-override"),
    pytest.param("4\ufe0f\u20e3", None, id="keycap-emoji"),
    pytest.param("\U0001f600", None, id="emoji"),
    pytest.param("\ufeff4", None, id="byte-order-mark"),
    pytest.param("1_000", None, id="underscore"),
    pytest.param("+3", None, id="plus-sign"),
    pytest.param("-3", None, id="minus-sign"),
    pytest.param(" 12 ", None, id="whitespace"),
    pytest.param("\t4\n", None, id="tab-newline"),
    pytest.param("4.0", None, id="decimal-point"),
    pytest.param("1e3", None, id="exponent"),
    pytest.param("0x10", None, id="hex"),
    pytest.param("\x00", None, id="nul"),
    pytest.param("4\x00", None, id="trailing-nul"),
    pytest.param("\x004", None, id="leading-nul"),
    pytest.param("", None, id="empty"),
    pytest.param("four", None, id="word"),
    pytest.param(4, None, id="int-is-not-text"),
    pytest.param(None, None, id="none"),
    pytest.param(True, None, id="bool"),
])
def test_a_count_is_ascii_digits_up_to_the_cap(text: Any, expected: int | None) -> None:
    assert parse_count(text, cap=CAP) == expected


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(" 12 ", 12, id="spaces"),
    pytest.param("\t4\r\n", 4, id="tab-cr-lf"),
    pytest.param("\x0b4\x0c", 4, id="vt-ff"),
    pytest.param("4\n", 4, id="yaml-block-scalar-newline"),
    pytest.param("   ", None, id="only-spaces"),
    pytest.param("\u00a04", None, id="no-break-space-is-not-ascii"),
    pytest.param("4\u2003", None, id="em-space-is-not-ascii"),
    pytest.param("\u30004", None, id="ideographic-space-is-not-ascii"),
    pytest.param("\x1c4", None, id="ascii-separator-is-no-padding"),
    pytest.param("1 2", None, id="space-inside"),
    pytest.param(" \uff14 ", None, id="padded-fullwidth"),
])
def test_padded_strips_ascii_whitespace_only(text: str, expected: int | None) -> None:
    assert parse_count(text, cap=CAP, padded=True) == expected


@pytest.mark.parametrize(("text", "signs", "expected"), [
    pytest.param("+3", "+", 3, id="plus-allowed"),
    pytest.param("-3", "+", None, id="minus-not-allowed"),
    pytest.param("-3", "-", -3, id="minus-allowed"),
    pytest.param("-0", "-", 0, id="minus-zero"),
    pytest.param("+-3", "+-", None, id="two-signs"),
    pytest.param("--3", "-", None, id="double-minus"),
    pytest.param("+", "+", None, id="sign-alone"),
    pytest.param("-4097", "-", None, id="magnitude-over-cap"),
    pytest.param("+\u00b2", "+", None, id="sign-then-superscript"),
    pytest.param("\uff0b3", "+", None, id="fullwidth-plus"),
])
def test_signs_are_only_those_the_caller_names(text: str, signs: str, expected: int | None) -> None:
    assert parse_count(text, cap=CAP, signs=signs) == expected


@pytest.mark.parametrize(("cap", "text", "expected"), [
    pytest.param(9, "9", 9, id="one-digit-cap"),
    pytest.param(9, "10", None, id="one-digit-cap-over"),
    pytest.param(2**31 - 1, "2147483647", 2**31 - 1, id="int32"),
    pytest.param(2**31 - 1, "2147483648", None, id="int32-over"),
    pytest.param(0, "0", 0, id="cap-zero"),
    pytest.param(-1, "0", None, id="negative-cap-reads-nothing"),
])
def test_the_cap_bounds_digits_and_value(cap: int, text: str, expected: int | None) -> None:
    assert parse_count(text, cap=cap) == expected


def test_every_string_is_a_count_or_none() -> None:
    """Total over what the fuzzer writes where counts are read: never an exception."""
    from fuzzing import COUNT_TEXTS, STRINGS

    for text in [*COUNT_TEXTS, *STRINGS]:
        for padded in (False, True):
            value = parse_count(text, cap=CAP, padded=padded, signs="+-")
            assert value is None or (isinstance(value, int) and abs(value) <= CAP), repr(text)
