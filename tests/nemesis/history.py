"""The history of a nemesis run and its checker.

A history is a list of events, each a dict with `t` (seconds since the run
began, monotonic), `process` (who saw it: a publisher, the consumer, a
drain through node N, or the nemesis) and `type`:

- `send` / `accept` / `refuse` (`id`): a publisher handed a message to its
  client library, heard `accepted`, heard another outcome. Every attempt
  has its own id and is never resent under it.
- `deliver` (`id`, `redelivered`): the consumer (or a drain) received and
  accepted it; `redelivered` when the broker marked it as handed out
  before (first-acquirer false), to this consumer or to one that went
  away.
- `fault` / `heal` (`fault`, `target`): the nemesis began or ended a fault.
- `note` (`text`): anything else worth keeping (client disconnects).

The checker knows nothing of brokers or processes: it reads a history and
says what went wrong. Kept as JSONL (`write_jsonl`) when a run fails.
"""

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class FaultWindow:
    fault: str
    target: str
    start: float
    heal: float
    # Filled by the checker.
    first_accept_after_heal_s: float = None
    longest_gap_s: float = None  # from the start to the next fault (or the end)
    longest_gap_during_s: float = None  # from the start to the heal
    n_accepts_during: int = 0  # accepted between 1 s after the start and the heal


@dataclass
class Report:
    n_sent: int = 0
    n_accepted: int = 0
    n_refused: int = 0
    n_delivered: int = 0
    lost: list = field(default_factory=list)  # (publisher, seq, fault active at send or None)
    unexpected: list = field(default_factory=list)
    duplicates: int = 0
    # (publisher, highest seq delivered before, seq delivered now): first
    # deliveries of fresh messages only; a redelivery (a message handed to
    # a consumer that went away) may come after later ones and is counted
    # in `late_redeliveries` instead.
    order_breaks: list = field(default_factory=list)
    late_redeliveries: int = 0
    longest_accept_gap_s: float = 0.0
    seconds_with_accept_share: float = 0.0
    faults: list = field(default_factory=list)
    problems: list = field(default_factory=list)

    def ok(self):
        return not self.problems

    def summary(self):
        lines = [
            f"sent={self.n_sent} accepted={self.n_accepted} refused={self.n_refused} "
            f"delivered={self.n_delivered} lost={len(self.lost)} unexpected={len(self.unexpected)} "
            f"duplicates={self.duplicates} order_breaks={len(self.order_breaks)} "
            f"late_redeliveries={self.late_redeliveries}",
            f"availability: longest gap between accepts {self.longest_accept_gap_s:.2f}s, "
            f"seconds with an accept {100 * self.seconds_with_accept_share:.0f}%",
        ]
        for w in self.faults:
            first = "never" if w.first_accept_after_heal_s is None else f"{w.first_accept_after_heal_s:.2f}s"
            lines.append(
                f"  {w.fault} on {w.target}: held {w.heal - w.start:.1f}s "
                f"(longest gap in it {w.longest_gap_during_s:.2f}s, {w.n_accepts_during} accepts after its "
                f"first second), longest gap until the next fault {w.longest_gap_s:.2f}s, "
                f"first accept after heal {first}"
            )
        lines += [f"PROBLEM: {p}" for p in self.problems]
        return "\n".join(lines)


def publisher_of(message_id):
    """`pub-a-0000012` -> (`pub-a`, 12)."""
    prefix, _, seq = message_id.rpartition("-")
    return prefix, int(seq)


def fault_at(windows, t):
    for w in windows:
        if w.start <= t <= w.heal:
            return f"{w.fault}@{w.target}"
    return None


def longest_gap(times, start, end):
    """The longest stretch of [start, end] with none of `times` (sorted)."""
    previous, longest = start, 0.0
    for t in times:
        if t < start:
            continue
        if t > end:
            break
        longest = max(longest, t - previous)
        previous = t
    return max(longest, end - previous)


def check(events, fault_end=None, resume_bound_s=None, gap_bound_s=None):
    """Check a history. `fault_end`: when the fault phase ended (the
    availability figures cover the time from the first accept to it);
    `resume_bound_s`: a fault whose queue accepted nothing within this
    long after its heal is a problem; `gap_bound_s`: so is a fault after
    whose start accepts stopped for longer than this (until the next
    fault): the cluster did not fail over while the fault lasted. It may
    be a dict of bounds by fault name, "*" for the others."""
    report = Report()
    sent, accepted, refused = {}, {}, set()
    delivered = []
    windows = []
    open_faults = {}
    # In time order: the run lists its own events (faults, the final
    # drains) before the clients', so a drain's fresh messages would
    # otherwise look older than the consumer's first deliveries.
    for e in sorted(events, key=lambda e: e["t"]):
        kind = e["type"]
        if kind == "send":
            sent[e["id"]] = e["t"]
        elif kind == "accept":
            accepted[e["id"]] = e["t"]
        elif kind == "refuse":
            refused.add(e["id"])
        elif kind == "deliver":
            delivered.append(e)
        elif kind == "fault":
            open_faults[(e["fault"], e["target"])] = e["t"]
        elif kind == "heal":
            start = open_faults.pop((e["fault"], e["target"]), e["t"])
            windows.append(FaultWindow(e["fault"], e["target"], start, e["t"]))
    report.n_sent, report.n_accepted, report.n_refused = len(sent), len(accepted), len(refused)
    report.n_delivered = len(delivered)
    for key in open_faults:
        report.problems.append(f"fault {key} never healed")

    counts = Counter(e["id"] for e in delivered)
    report.duplicates = sum(n - 1 for n in counts.values())
    for message_id in sorted(set(accepted) - set(counts)):
        publisher, seq = publisher_of(message_id)
        report.lost.append((publisher, seq, fault_at(windows, sent.get(message_id, 0.0))))
    report.unexpected = sorted(set(counts) - set(sent))
    if report.lost:
        report.problems.append(f"{len(report.lost)} accepted messages never delivered: {report.lost[:10]}")
    if report.unexpected:
        report.problems.append(f"delivered but never sent: {report.unexpected[:10]}")
    if set(accepted) - set(sent):
        report.problems.append("accepted but never sent (history is broken)")

    # Per-publisher order, on first deliveries (one consumer at a time, so
    # the queue's FIFO order is what it hands out). A message the broker
    # had handed to a consumer that went away comes back marked
    # redelivered, possibly after later ones: allowed, counted apart.
    # Only confirmed publishes carry an order promise: one whose outcome
    # the publisher never saw (its connection was cut) may still reach the
    # broker later, when TCP delivers what the socket held, after the
    # publisher's newer messages on a new connection (seen in a soak: 20
    # such, sent as a client cut began, committed 28 s later).
    seen, last = set(), defaultdict(lambda: -1)
    for e in delivered:
        if e["id"] in seen or e["id"] not in accepted:
            continue
        seen.add(e["id"])
        publisher, seq = publisher_of(e["id"])
        if seq < last[publisher]:
            if e.get("redelivered"):
                report.late_redeliveries += 1
            else:
                report.order_breaks.append((publisher, last[publisher], seq))
        last[publisher] = max(last[publisher], seq)
    if report.order_breaks:
        report.problems.append(f"per-publisher order broken: {report.order_breaks[:10]}")

    accept_times = sorted(accepted.values())
    if accept_times:
        end = fault_end if fault_end is not None else accept_times[-1]
        report.longest_accept_gap_s = longest_gap(accept_times, accept_times[0], end)
        n_seconds = max(1, math.ceil(end - accept_times[0]))
        busy = {int(t - accept_times[0]) for t in accept_times if t <= end}
        report.seconds_with_accept_share = min(1.0, len(busy) / n_seconds)
    for i, w in enumerate(windows):
        after = [t for t in accept_times if t >= w.heal]
        w.first_accept_after_heal_s = after[0] - w.heal if after else None
        window_end = windows[i + 1].start if i + 1 < len(windows) else (fault_end or w.heal)
        w.longest_gap_s = longest_gap(accept_times, w.start, max(window_end, w.heal))
        w.longest_gap_during_s = longest_gap(accept_times, w.start, w.heal)
        w.n_accepts_during = sum(1 for t in accept_times if w.start + 1.0 < t <= w.heal)
        bound = gap_bound_s.get(w.fault, gap_bound_s.get("*")) if isinstance(gap_bound_s, dict) else gap_bound_s
        if bound is not None and w.longest_gap_s > bound:
            report.problems.append(
                f"{w.fault} on {w.target}: accepts stopped for {w.longest_gap_s:.1f}s (bound {bound}s)"
            )
        if resume_bound_s is not None and (
            w.first_accept_after_heal_s is None or w.first_accept_after_heal_s > resume_bound_s
        ):
            report.problems.append(
                f"{w.fault} on {w.target}: no accept within {resume_bound_s}s of the heal"
            )
    report.faults = windows
    return report


def write_jsonl(events, path):
    with open(path, "w") as f:
        for e in sorted(events, key=lambda e: e["t"]):
            f.write(json.dumps(e) + "\n")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
