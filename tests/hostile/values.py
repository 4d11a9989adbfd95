"""Hypothesis strategies of hostile values, and the strict comparison of what was read back."""

import math

from hypothesis import strategies as st

# Every code point, surrogates and NUL included (hypothesis leaves surrogates out by default),
# with the troublemakers drawn often.
any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
hostile_text = st.one_of(
    st.text(any_char, max_size=20),
    st.sampled_from(["", "a\x00b", "\x00", "\ud800", "x\udfff", "\ud83d\ude00", "é😀", "\\u0000"]),
    st.integers(0, 400).map(lambda n: "é" * n),
)
hostile_ints = st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1]),
    # Past the 4,300 digits that int() and str() accept (drawn, not listed: their repr fails).
    st.integers(4290, 5000).map(lambda digits: 10**digits),
)
hostile_floats = st.one_of(
    st.floats(),  # nan, inf, -0.0, subnormals and huge ones included
    st.sampled_from([-0.0, 1e16, 9999999999999998.0, 1e300, 5e-324, 0.1 + 0.2]),
)
scalars = st.one_of(st.none(), st.booleans(), hostile_ints, hostile_floats, hostile_text)


def nested(depth: int):
    value = []
    for _ in range(depth):
        value = [value]
    return value


json_values = st.one_of(
    st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(hostile_text, children, max_size=4),
        ),
        max_leaves=12,
    ),
    st.integers(90, 110).map(nested),  # around the nesting limit
    st.just(nested(5000)),
)


def same(stored, given) -> bool:
    """Whether ``stored`` is ``given`` read back: equal values of the same JSON types.

    Tuples come back as lists, and dicts compare without their key order (PostgreSQL's jsonb
    keeps its own); a float must come back a float with the same bits, an int an int.
    """
    if isinstance(given, tuple):
        given = list(given)
    if type(stored) is not type(given):
        return False
    if isinstance(given, float):
        return math.copysign(1, stored) == math.copysign(1, given) and stored == given
    if isinstance(given, list):
        return len(stored) == len(given) and all(map(same, stored, given))
    if isinstance(given, dict):
        return stored.keys() == given.keys() and all(same(stored[k], given[k]) for k in given)
    return stored == given
