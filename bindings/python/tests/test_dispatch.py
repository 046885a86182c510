"""Dispatch mode (the application's thread runs the callbacks) and sends
from inside a callback (never waiting: Again, then on_send_ready)."""

import asyncio
import selectors
import tempfile
import threading
import unittest

import support  # noqa: F401 - the package on sys.path
import spindle

WAIT = 20.0  # seconds: a deadline, never a pause
MAX_PAYLOAD = 64


def one_member(directory, window=4, max_payload=MAX_PAYLOAD, **options):
    subgroup = spindle.Subgroup(members=[0], window=window, max_payload=max_payload)
    return spindle.Group([subgroup], bootstrap=directory, bootstrap_kind="dir", **options)


def dispatch_until(group, done):
    """Event loop over group.fileno(): dispatches whenever it is readable
    until done() holds; fails when it stays quiet for WAIT seconds."""
    with selectors.DefaultSelector() as selector:
        selector.register(group.fileno(), selectors.EVENT_READ)
        while not done():
            if not selector.select(timeout=WAIT):
                raise AssertionError(f"the group's descriptor stayed quiet for {WAIT} s")
            group.dispatch()


class DispatchModeTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory(prefix="spindle-py-")
        self.addCleanup(self.directory.cleanup)

    def test_callbacks_run_inside_dispatch_on_the_calling_thread(self):
        delivered = []

        def on_deliver(batch):
            delivered.extend((threading.get_ident(), m.data) for m in batch)

        with one_member(self.directory.name, dispatch=True, on_deliver=on_deliver) as group:
            for index in range(3):
                group.send(0, b"m%d" % index)
            with selectors.DefaultSelector() as selector:
                selector.register(group.fileno(), selectors.EVENT_READ)
                self.assertTrue(selector.select(timeout=WAIT), "nothing queued for dispatch")
            # Queued, not run: nothing runs a callback but dispatch().
            self.assertEqual(delivered, [])
            self.assertGreater(group.stats().dispatch_queue_bytes, 0)
            self.assertEqual(group.dispatch(spindle.DISPATCH_ONE), 1)
            self.assertTrue(delivered)
            dispatch_until(group, lambda: len(delivered) >= 3)
            self.assertEqual([data for _, data in delivered], [b"m0", b"m1", b"m2"])
            self.assertEqual({ident for ident, _ in delivered}, {threading.get_ident()})
            self.assertEqual(group.dispatch(), 0, "the queue should be empty")
            group.shutdown(WAIT)
            # Stopped and drained: the descriptor says so, dispatch() raises.
            with selectors.DefaultSelector() as selector:
                selector.register(group.fileno(), selectors.EVENT_READ)
                self.assertTrue(selector.select(timeout=WAIT), "not readable after shutdown")
            with self.assertRaises(spindle.Shutdown):
                group.dispatch()

    def test_an_asyncio_loop_dispatches_through_add_reader(self):
        async def run(group, delivered, done):
            loop = asyncio.get_running_loop()
            loop.add_reader(group.fileno(), group.dispatch)
            try:
                for index in range(5):
                    group.send(0, b"a%d" % index)
                await asyncio.wait_for(done.wait(), WAIT)
            finally:
                loop.remove_reader(group.fileno())

        delivered = []
        done = asyncio.Event()

        def on_deliver(batch):
            delivered.extend(m.data for m in batch)
            if len(delivered) == 5:
                done.set()  # on the loop's own thread: no call_soon_threadsafe needed

        with one_member(self.directory.name, dispatch=True, on_deliver=on_deliver) as group:
            asyncio.run(run(group, delivered, done))
            self.assertEqual(delivered, [b"a%d" % index for index in range(5)])
            group.shutdown(WAIT)

    def test_an_exception_of_a_dispatched_callback_is_raised_by_dispatch(self):
        seen = []

        def on_deliver(batch):
            seen.extend(m.data for m in batch)
            if any(m.data == b"bad" for m in batch):
                raise KeyError("on_deliver raises on purpose")

        with one_member(self.directory.name, dispatch=True, on_deliver=on_deliver) as group:
            group.send(0, b"bad")
            with self.assertRaisesRegex(KeyError, "on purpose"):
                dispatch_until(group, lambda: False)
            group.send(0, b"good")
            dispatch_until(group, lambda: b"good" in seen)
            self.assertEqual(seen, [b"bad", b"good"])
            group.shutdown(WAIT)

    def test_dispatch_is_refused_where_it_cannot_work(self):
        refused = []

        def on_deliver(batch):
            try:
                group.dispatch()
            except RuntimeError as error:
                refused.append(str(error))

        with one_member(self.directory.name) as plain:
            with self.assertRaisesRegex(spindle.InvalidArgument, "dispatch mode"):
                plain.fileno()
            with self.assertRaisesRegex(spindle.InvalidArgument, "dispatch mode"):
                plain.dispatch()
        group = one_member(self.directory.name, dispatch=True, on_deliver=on_deliver)
        with group:
            with self.assertRaisesRegex(spindle.InvalidArgument, "flags 9"):
                group.dispatch(9)
            group.send(0, b"x")
            dispatch_until(group, lambda: refused)
            self.assertIn("dispatch called from a callback of this group", refused[0])
            group.shutdown(WAIT)
        with self.assertRaisesRegex(spindle.InvalidArgument, "dispatch_queue_bytes 100"):
            one_member(self.directory.name, dispatch=True, dispatch_queue_bytes=100)


class SendFromCallbackTest(unittest.TestCase):
    """A request answered from the callback that delivers it, with one
    reply more than the window holds. Nothing this member sends can be
    delivered while the callback runs (default mode: the callback holds
    the predicate lock; dispatch mode: the queue, bounded to exactly the
    request, is full until the callback returns; the bound cannot be below
    the largest message, a point-to-point one's included, hence the size
    of the request), so at most `window`
    replies fit and the next raises Again every time: the rest goes out
    from on_send_ready."""

    WINDOW = 2

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory(prefix="spindle-py-")
        self.addCleanup(self.directory.cleanup)

    def answer_from_the_callback(self, dispatch):
        request = b"R" * spindle.P2P_MAX_PAYLOAD
        replies = [b"reply %d" % index for index in range(self.WINDOW + 1)]
        pending, again, ready, delivered, refused = [], [], [], [], []
        done = threading.Event()
        group = None

        def send_pending():
            while pending:
                try:
                    group.send(0, pending[0])
                except spindle.Again as error:
                    again.append(error)
                    return
                pending.pop(0)

        def on_deliver(batch):
            for message in batch:
                delivered.append(message.data)
                if message.data == request:
                    pending.extend(replies)
                    send_pending()
                    for call in (lambda: group.flush(WAIT), group.close):
                        try:
                            call()
                        except RuntimeError as error:
                            refused.append(str(error))
            if len(delivered) == 1 + len(replies):
                done.set()

        def on_send_ready(subgroup):
            ready.append(subgroup)
            send_pending()

        options = {}
        if dispatch:
            options = {
                "dispatch": True,
                "dispatch_queue_bytes": spindle.DISPATCH_OVERHEAD + len(request),
            }
        group = one_member(
            self.directory.name,
            window=self.WINDOW,
            max_payload=len(request),
            on_deliver=on_deliver,
            on_send_ready=on_send_ready,
            **options,
        )
        with group:
            group.send(0, request)
            if dispatch:
                dispatch_until(group, done.is_set)
            else:
                self.assertTrue(done.wait(WAIT), f"delivered only {delivered}")
            self.assertEqual(delivered, [request] + replies)
            self.assertTrue(again, "no send from the callback found the window full")
            self.assertEqual(again[0].code, spindle.EAGAIN)
            self.assertTrue(ready, "on_send_ready was never called")
            self.assertEqual(set(ready), {0})
            self.assertEqual(pending, [])
            self.assertEqual(len(refused), 2, refused)
            self.assertIn("flush called from a callback of this group", refused[0])
            self.assertIn("close() called from a callback of this group", refused[1])
            self.assertFalse(group.closed)
            group.shutdown(WAIT)

    def test_on_the_library_thread(self):
        self.answer_from_the_callback(dispatch=False)

    def test_in_dispatch_mode(self):
        self.answer_from_the_callback(dispatch=True)


if __name__ == "__main__":
    unittest.main()
