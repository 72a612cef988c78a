"""The ``when`` filter: a time that static/js/times.js makes relative, exact in UTC beneath."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from django.template import Context, Template

from sessions_app.templatetags.ago import exact, when


def test_a_moment_is_a_time_element_with_its_exact_utc_time_as_text_and_title() -> None:
    moment = datetime(2026, 4, 28, 12, 3, 4, 567000, tzinfo=UTC)
    assert when(moment) == (
        '<time datetime="2026-04-28T12:03:04+00:00" title="2026-04-28 12:03:04 UTC" '
        "data-relative>2026-04-28 12:03:04</time>"
    )


def test_a_moment_in_another_zone_is_shown_in_utc() -> None:
    paris = timezone(timedelta(hours=2))
    shown = when(datetime(2026, 4, 28, 14, 0, tzinfo=paris))
    assert 'datetime="2026-04-28T12:00:00+00:00"' in shown
    assert 'title="2026-04-28 12:00:00 UTC"' in shown


def test_a_protocol_timestamp_is_the_moment_it_names() -> None:
    assert when("2026-04-28T12:03:04.567Z") == when(
        datetime(2026, 4, 28, 12, 3, 4, 567000, tzinfo=UTC)
    )


def test_no_moment_shows_nothing() -> None:
    assert when(None) == ""
    assert when("") == ""


def test_a_template_gets_markup_not_escaped_text() -> None:
    moment = datetime(2026, 4, 28, 12, 0, tzinfo=UTC)
    rendered = Template("{% load ago %}{{ moment|when }}").render(Context({"moment": moment}))
    assert rendered.startswith('<time datetime="2026-04-28T12:00:00+00:00"')


def test_an_exact_time_is_in_utc_until_the_viewers_zone_is_known_and_utc_on_hover() -> None:
    paris = timezone(timedelta(hours=2))
    moment = datetime(2026, 4, 28, 14, 3, 4, tzinfo=paris)
    assert exact(moment) == (
        '<time datetime="2026-04-28T12:03:04+00:00" title="2026-04-28 12:03:04 UTC" '
        'data-local="seconds">2026-04-28 12:03:04</time>'
    )
    assert exact(moment, "time").endswith('data-local="time">12:03:04</time>')
    assert exact(moment, "minutes").endswith('data-local="minutes">2026-04-28 12:03</time>')
    assert exact(None) == ""
