"""Failures as exceptions: the code, its name and the library's message."""

import gc
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest

import support
import spindle


def one_member(directory, **options):
    subgroup = options.pop("subgroup", spindle.Subgroup(members=[0], window=4, max_payload=64))
    return spindle.Group([subgroup], bootstrap=directory, bootstrap_kind="dir", **options)


class ErrorTableTest(unittest.TestCase):
    def test_every_code_of_error_h_has_its_name_and_class(self):
        enum = re.search(r"enum spindle_error \{(.*?)\};", support.header("error.h"), re.S)
        declared = {
            int(code): name
            for name, code in re.findall(r"(SPINDLE_E[A-Z]+) = (-\d+)", enum.group(1))
        }
        self.assertEqual(
            {code: name for code, (name, _) in spindle.CODES.items()},
            declared,
            "spindle/errors.py CODES and include/spindle/error.h disagree",
        )
        for code, (name, cls) in spindle.CODES.items():
            self.assertEqual(cls.code, code, name)
            self.assertTrue(issubclass(cls, spindle.SpindleError), name)
            self.assertEqual(getattr(spindle, name[len("SPINDLE_"):]), code)
            self.assertNotEqual(spindle.strerror(code), "", name)

    def test_an_unknown_code_still_makes_an_error(self):
        error = spindle.errors.make_error(-99, "call")
        self.assertIs(type(error), spindle.SpindleError)
        self.assertEqual(error.name, "SPINDLE_E-99")


class GroupErrorsTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory(prefix="spindle-py-")
        self.addCleanup(self.directory.cleanup)

    def test_a_window_of_zero_is_invalid_and_named(self):
        with self.assertRaises(spindle.InvalidArgument) as caught:
            one_member(self.directory.name, subgroup=spindle.Subgroup(members=[0], window=0))
        error = caught.exception
        self.assertEqual(error.code, spindle.EINVAL)
        self.assertEqual(error.name, "SPINDLE_EINVAL")
        self.assertIsInstance(error, ValueError)
        self.assertIn("window", error.detail)
        self.assertIn("spindle_group_create", str(error))

    def test_an_unknown_transport_is_not_supported(self):
        with self.assertRaises(spindle.NotSupported) as caught:
            one_member(self.directory.name, transport="carrier-pigeon")
        self.assertIn("carrier-pigeon", caught.exception.detail)

    def test_unknown_options_and_bad_values_are_refused_before_the_library(self):
        with self.assertRaisesRegex(TypeError, "unknown option 'windw'"):
            one_member(self.directory.name, windw=3)
        with self.assertRaisesRegex(TypeError, "on_deliver"):
            one_member(self.directory.name, deliver=print)
        with self.assertRaisesRegex(ValueError, "mode 'sorted'"):
            one_member(self.directory.name, subgroup=spindle.Subgroup(members=[0], mode="sorted"))

    def test_errors_of_a_running_group(self):
        failures = []
        called = threading.Event()

        def on_deliver(batch):
            # A call that would wait for the callback's own thread is
            # refused, not a deadlock.
            try:
                group.flush(10)
            except RuntimeError as e:
                failures.append(str(e))
            called.set()

        group = one_member(self.directory.name, on_deliver=on_deliver)
        with group:
            with self.assertRaises(spindle.MessageTooLarge) as caught:
                group.send(0, b"x" * 65)
            self.assertEqual(caught.exception.code, spindle.EMSGSIZE)
            self.assertIn("65", caught.exception.detail)
            self.assertIn("64", caught.exception.detail)
            with self.assertRaises(spindle.InvalidArgument):
                group.send(7, b"no such subgroup")
            group.send(0, b"one")
            self.assertTrue(called.wait(10), "no delivery")
            self.assertEqual(len(failures), 1)
            self.assertIn("callback", failures[0])
            with self.assertRaises(RuntimeError):
                group.receive(0)
            with self.assertRaises(spindle.TimedOut) as caught:
                group.wait_for_view(lambda view: view.view_id > 0, timeout=0.05)
            self.assertIsInstance(caught.exception, TimeoutError)
            self.assertIsNone(group.status())
            group.shutdown(10)
        self.assertTrue(group.closed)
        with self.assertRaises(spindle.Shutdown):
            group.send(0, b"after close")

    def test_receive_times_out_and_ends_at_close(self):
        group = one_member(self.directory.name)
        with self.assertRaises(spindle.TimedOut):
            group.receive(timeout=0.05)
        group.send(0, memoryview(b"xaxbxc")[1::2])  # read-only and strided: copied
        group.send(0, memoryview(bytearray(b"de")))  # writable: taken in place
        with group.reserve(0, 3) as slot:
            slot[:] = b"fgh"
        with self.assertRaises(KeyError):
            with group.reserve(0, 2) as slot:
                slot[0] = 1
                raise KeyError("the block failed")
        got = []
        while len(got) < 4:
            got += group.receive(timeout=10)
        self.assertEqual([m.data for m in got], [b"abc", b"de", b"fgh", b"\0\0"])
        self.assertEqual([m.sender_index for m in got], [0, 1, 2, 3])
        group.close()
        group.close()  # twice is fine
        self.assertEqual(list(group.messages(timeout=1)), [])



class LifetimeTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory(prefix="spindle-py-")
        self.addCleanup(self.directory.cleanup)

    def test_a_group_nobody_holds_is_destroyed(self):
        group = one_member(self.directory.name)
        core = group._core
        group.send(0, b"left behind")
        del group
        gc.collect()
        self.assertIsNone(core.handle, "the dropped group was not destroyed")

    def test_the_interpreter_exits_with_a_group_still_open(self):
        script = (
            "import sys; sys.path.insert(0, sys.argv[1]); import spindle\n"
            "g = spindle.Group([spindle.Subgroup([0])], bootstrap=sys.argv[2])\n"
            "g.send(0, b'unflushed')\n"
            "print('exiting', flush=True)\n"
        )
        package = os.path.join(support.HERE, "..")
        ran = subprocess.run(
            [sys.executable, "-c", script, package, self.directory.name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual((ran.returncode, ran.stdout), (0, "exiting\n"), ran.stderr)


if __name__ == "__main__":
    unittest.main()
