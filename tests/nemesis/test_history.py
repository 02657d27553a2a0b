"""The checker on hand-made histories: it must see each kind of problem
(a checker that passes everything would make every nemesis run green)."""

import history


def ev(t, kind, message_id=None, process="pub", **fields):
    event = {"t": t, "process": process, "type": kind, **fields}
    if message_id is not None:
        event["id"] = message_id
    return event


def published(t, message_id):
    return [ev(t, "send", message_id), ev(t + 0.01, "accept", message_id)]


def delivered(t, message_id, redelivered=False):
    return ev(t, "deliver", message_id, process="consumer", redelivered=redelivered)


def test_a_clean_history_passes_and_counts_duplicates():
    events = published(0.0, "a-0000000") + published(0.1, "a-0000001")
    events += [delivered(0.2, "a-0000000"), delivered(0.3, "a-0000000", True), delivered(0.4, "a-0000001")]
    report = history.check(events)
    assert report.ok(), report.summary()
    assert report.duplicates == 1


def test_lost_unexpected_and_order_are_problems():
    events = published(0.0, "a-0000000") + published(0.1, "a-0000001") + published(0.2, "a-0000002")
    events += [delivered(1.0, "a-0000002"), delivered(1.1, "a-0000001"), delivered(1.2, "b-0000000")]
    report = history.check(events)
    assert [(p, s) for p, s, _ in report.lost] == [("a", 0)]
    assert report.unexpected == ["b-0000000"]
    assert report.order_breaks == [("a", 2, 1)]
    assert len(report.problems) == 3, report.summary()


def test_a_late_redelivery_is_not_an_order_break():
    events = published(0.0, "a-0000000") + published(0.1, "a-0000001")
    events += [delivered(1.0, "a-0000001"), delivered(1.1, "a-0000000", redelivered=True)]
    report = history.check(events)
    assert report.ok(), report.summary()
    assert report.late_redeliveries == 1


def test_order_is_judged_in_time_order_not_list_order():
    # The run's own drain events come first in the list, the consumer's
    # after: a drain that gets the rest in order is no order break.
    events = published(0.0, "a-0000000") + published(0.1, "a-0000001")
    events = [ev(9.0, "deliver", "a-0000001", process="drain-1", redelivered=False)] + events
    events += [delivered(1.0, "a-0000000")]
    report = history.check(events)
    assert report.ok(), report.summary()
    assert report.order_breaks == []


def test_an_unconfirmed_publish_delivered_late_is_no_order_break():
    events = [ev(0.0, "send", "a-0000000")] + published(0.1, "a-0000001")
    events += [delivered(1.0, "a-0000001"), delivered(1.1, "a-0000000")]
    report = history.check(events)
    assert report.order_breaks == [], report.summary()
    # The same two, both confirmed: an order break.
    events = published(0.0, "a-0000000") + published(0.1, "a-0000001")
    events += [delivered(1.0, "a-0000001"), delivered(1.1, "a-0000000")]
    assert history.check(events).order_breaks == [("a", 1, 0)]


def test_availability_per_fault():
    events = published(0.0, "a-0000000")
    events += [ev(1.0, "fault", process="nemesis", fault="kill9-leader", target="1")]
    events += published(3.0, "a-0000001")
    events += [ev(20.0, "heal", process="nemesis", fault="kill9-leader", target="1")]
    events += published(21.0, "a-0000002")
    events += [delivered(22.0, f"a-000000{i}") for i in range(3)]
    report = history.check(events, fault_end=22.0, resume_bound_s=30.0, gap_bound_s=10.0)
    [window] = report.faults
    assert round(window.first_accept_after_heal_s, 2) == 1.01
    assert round(window.longest_gap_s, 2) == 18.0
    assert any("accepts stopped for 18.0s" in p for p in report.problems), report.summary()


def test_gap_bounds_by_fault_name():
    events = published(0.0, "a-0000000")
    events += [ev(1.0, "fault", process="nemesis", fault="partition-bridge", target="1")]
    events += [ev(13.0, "heal", process="nemesis", fault="partition-bridge", target="1")]
    events += published(14.0, "a-0000001")
    events += [delivered(15.0, f"a-000000{i}") for i in range(2)]
    bounds = {"*": 10.0, "partition-bridge": 18.0}
    assert history.check(events, fault_end=15.0, gap_bound_s=bounds).ok()
    report = history.check(events, fault_end=15.0, gap_bound_s={"*": 10.0})
    assert any("accepts stopped for 13.0s (bound 10.0s)" in p for p in report.problems), report.summary()


def test_a_fault_never_followed_by_an_accept_is_a_problem():
    events = published(0.0, "a-0000000") + [delivered(0.5, "a-0000000")]
    events += [
        ev(1.0, "fault", process="nemesis", fault="sigstop-leader", target="2"),
        ev(2.0, "heal", process="nemesis", fault="sigstop-leader", target="2"),
    ]
    report = history.check(events, fault_end=40.0, resume_bound_s=30.0)
    assert any("no accept within 30.0s" in p for p in report.problems), report.summary()


def test_the_history_round_trips_through_jsonl(tmp_path):
    events = published(0.0, "a-0000000") + [delivered(0.5, "a-0000000")]
    path = tmp_path / "history.jsonl"
    history.write_jsonl(events, path)
    assert history.read_jsonl(path) == sorted(events, key=lambda e: e["t"])
