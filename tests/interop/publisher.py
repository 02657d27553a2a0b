"""A windowed publisher of confirmed messages in its own process, and the
reader of its output, shared by the tests that crash or break a broker
under load (test_quorum.py, test_disk_faults.py).

Proton's reactor keeps many publishes in flight, so the broker can be
killed or hit by a fault mid-stream; the publisher prints one line per
event (below) and exits when its connection dies.
"""

import textwrap
import threading

# A publisher in its own process (Proton's reactor, many publishes in
# flight), so that the broker can be SIGKILLed mid-stream while it runs.
# One stdout line per event: "S <id>" before a message is handed to Proton,
# "A <id>" when it is accepted, "N <id> <state>" for any other outcome,
# "DISCONNECTED" / "TIMEOUT" / "END". Arguments: url, address, window,
# limit, deadline in seconds, optionally a body padding in bytes (the body
# is then "<id> xxx...": the id is its first word) and an id prefix ("id").
PUBLISHER_SCRIPT = textwrap.dedent(
    """
    import sys
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    url, address = sys.argv[1], sys.argv[2]
    window, limit, deadline_s = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    # Optional: bytes of padding after the id in each body ("<id> xxx...").
    padding = "x" * int(sys.argv[6]) if len(sys.argv) > 6 else ""
    # Optional: the ids' prefix, so several runs on one queue never share one.
    prefix = sys.argv[7] if len(sys.argv) > 7 else "id"

    def emit(line):
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    def tag_of(delivery):
        tag = delivery.tag
        return tag.decode() if isinstance(tag, bytes) else tag

    class Publisher(MessagingHandler):
        def __init__(self):
            super().__init__()
            self.next_id = 0
            self.in_flight = 0

        def on_start(self, event):
            event.container.schedule(deadline_s, self)
            conn = event.container.connect(url, reconnect=False)
            event.container.create_sender(conn, address)

        def on_timer_task(self, event):
            emit("TIMEOUT")
            event.container.stop()

        def publish(self, sender):
            while sender.credit > 0 and self.in_flight < window and self.next_id < limit:
                tag = f"{prefix}-{self.next_id:07d}"
                self.next_id += 1
                emit("S " + tag)
                sender.send(Message(body=f"{tag} {padding}" if padding else tag), tag=tag)
                self.in_flight += 1

        def on_sendable(self, event):
            self.publish(event.sender)

        def settled(self, event, line):
            emit(line)
            self.in_flight -= 1
            self.publish(event.link)

        def on_accepted(self, event):
            self.settled(event, "A " + tag_of(event.delivery))

        def on_rejected(self, event):
            self.settled(event, "N " + tag_of(event.delivery) + " rejected")

        def on_released(self, event):
            self.settled(event, "N " + tag_of(event.delivery) + " released")

        def on_disconnected(self, event):
            emit("DISCONNECTED")
            event.container.stop()

        def on_transport_error(self, event):
            emit("DISCONNECTED")
            event.container.stop()

    Container(Publisher()).run()
    emit("END")
    """
)


class PublisherOutput:
    """Reads the publisher's stdout on a thread; signals once enough
    publishes were accepted."""

    def __init__(self, stream, kill_after: int):
        self.sent = []
        self.accepted = []
        self.not_accepted = []
        self.other = []
        self.enough = threading.Event()
        self._kill_after = kill_after
        self._stream = stream
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self._stream:
            kind, _, rest = line.strip().partition(" ")
            if kind == "S":
                self.sent.append(rest)
            elif kind == "A":
                self.accepted.append(rest)
                if len(self.accepted) >= self._kill_after:
                    self.enough.set()
            elif kind == "N":
                self.not_accepted.append(rest)
            else:
                self.other.append(line.strip())
        self.enough.set()  # EOF: the publisher ended, whatever the reason
