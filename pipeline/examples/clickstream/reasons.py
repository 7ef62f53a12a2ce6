"""Quarantine reason codes, shared by the Spark parser and the Python reference.

Only the names are shared; each side implements the rules on its own. A line
gets exactly one reason: the first failing check in this order:

1. ``bad_encoding``: the line is not valid UTF-8 (its ``raw`` is then the
   bytes read as ISO-8859-1, losslessly).
2. ``not_json``: the line is not exactly one JSON value, or passes Jackson's read
   limits (a number over 1000 characters, a string over 20,000,000, nesting
   deeper than 999 levels).
3. ``not_object``: the JSON value is not an object.
4. ``duplicate_field:<f>``: the object names one of the five fields
   (``event_id``, ``user_id``, ``event_type``, ``event_time``, ``amount``)
   more than once (the first such field in that order).
5. for each of ``event_id``, ``user_id``, ``event_type``, ``event_time`` in this
   order: ``missing_field:<f>`` (absent or JSON null), ``bad_type:<f>`` (not a
   string; for ``event_id``/``user_id`` also the empty string), then
   ``unknown_event_type`` for ``event_type`` and ``timestamp_without_offset`` /
   ``bad_timestamp`` for ``event_time``.
6. for purchases only: ``missing_amount`` (absent or null), ``bad_type:amount``
   (not a JSON number, or not finite), ``negative_amount`` (< 0).
"""

from __future__ import annotations

BAD_ENCODING = "bad_encoding"
NOT_JSON = "not_json"
NOT_OBJECT = "not_object"
UNKNOWN_EVENT_TYPE = "unknown_event_type"
TIMESTAMP_WITHOUT_OFFSET = "timestamp_without_offset"
BAD_TIMESTAMP = "bad_timestamp"
MISSING_AMOUNT = "missing_amount"
NEGATIVE_AMOUNT = "negative_amount"
BAD_TYPE_AMOUNT = "bad_type:amount"

#: The string fields every event must carry, in checking order.
STRING_FIELDS: tuple[str, ...] = ("event_id", "user_id", "event_type", "event_time")
#: Every field the parser reads (a duplicate of any of them is rejected).
ALL_FIELDS: tuple[str, ...] = (*STRING_FIELDS, "amount")
#: The accepted event types (case-sensitive).
EVENT_TYPES: tuple[str, ...] = ("view", "add_to_cart", "purchase")


def missing_field(field: str) -> str:
    """The reason code of an absent (or JSON null) field."""
    return f"missing_field:{field}"


def bad_type(field: str) -> str:
    """The reason code of a field with the wrong JSON type (or an empty id)."""
    return f"bad_type:{field}"


def duplicate_field(field: str) -> str:
    """The reason code of an object naming ``field`` more than once."""
    return f"duplicate_field:{field}"


#: Every reason code a line can get.
ALL_REASONS: frozenset[str] = frozenset(
    {BAD_ENCODING, NOT_JSON, NOT_OBJECT, UNKNOWN_EVENT_TYPE, TIMESTAMP_WITHOUT_OFFSET, BAD_TIMESTAMP}
    | {MISSING_AMOUNT, NEGATIVE_AMOUNT, BAD_TYPE_AMOUNT}
    | {missing_field(f) for f in STRING_FIELDS}
    | {bad_type(f) for f in STRING_FIELDS}
    | {duplicate_field(f) for f in ALL_FIELDS}
)
