"""Groups from a configuration file and from a launcher's environment
(spindle_group_setup_from_config, spindle_group_setup_from_env)."""

import os
import tempfile
import unittest

import support
import spindle

CONFIG = """\
[group]
name = py-{port}
failure_timeout_ms = 2000

[member.0]
host = 127.0.0.1
port = {port}
name = solo

[subgroup.0]
members = 0
window_size = 8
max_payload = 32
mode = unordered
"""


def round_trip(group, data):
    group.send(0, data)
    batch = group.receive(timeout=10)
    return [m.data for m in batch]


class FromConfigTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory(prefix="spindle-py-")
        self.addCleanup(self.directory.cleanup)
        self.path = os.path.join(self.directory.name, "group.ini")

    def write(self, text):
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_a_member_of_the_file_with_its_subgroups_and_name(self):
        self.write(CONFIG.format(port=support.free_port()))
        with spindle.Group.from_config(self.path, 0, bootstrap_timeout_ms=10000) as group:
            self.assertEqual(
                group.setup_subgroups,
                (spindle.Subgroup((0,), (0,), 8, 32, spindle.UNORDERED),),
            )
            self.assertEqual(group.view.identities[0].name, "solo")
            self.assertEqual(round_trip(group, b"configured"), [b"configured"])
            with self.assertRaises(spindle.MessageTooLarge):
                group.send(0, b"y" * 33)
            group.shutdown(10)

    def test_a_malformed_file_names_its_line(self):
        self.write("[group]\nfailure_timeout_ms = soon\n")
        with self.assertRaises(spindle.ConfigError) as caught:
            spindle.Group.from_config(self.path, 0)
        self.assertIn("group.ini:2", caught.exception.detail)
        self.assertIn("soon", caught.exception.detail)

    def test_a_missing_file_and_a_missing_member(self):
        with self.assertRaises(spindle.NotFound):
            spindle.Group.from_config(self.path, 0)
        self.write(CONFIG.format(port=support.free_port()))
        with self.assertRaises(spindle.InvalidArgument) as caught:
            spindle.Group.from_config(self.path, 5)
        self.assertIn("5", caught.exception.detail)


class FromEnvTest(unittest.TestCase):
    def environment(self, **variables):
        for name, value in variables.items():
            old = os.environ.get(name)
            os.environ[name] = value
            self.addCleanup(
                lambda n=name, o=old: os.environ.pop(n) if o is None else os.environ.update({n: o})
            )

    def test_a_launcher_of_one_gives_the_default_subgroup(self):
        self.environment(
            SPINDLE_RANK="0", SPINDLE_SIZE="1", SPINDLE_BASE_PORT=str(support.free_port())
        )
        with spindle.Group.from_env(bootstrap_timeout_ms=10000) as group:
            self.assertEqual(group.local_rank, 0)
            self.assertEqual((group.member_id, group.size), (0, 1))
            (subgroup,) = group.setup_subgroups
            self.assertEqual((subgroup.window, subgroup.max_payload), (100, 1024))
            self.assertEqual(subgroup.mode, spindle.ATOMIC)
            self.assertEqual(round_trip(group, b"launched"), [b"launched"])
            group.shutdown(10)

    def test_a_malformed_variable_is_named(self):
        self.environment(SPINDLE_RANK="0", SPINDLE_SIZE="four")
        with self.assertRaises(spindle.ConfigError) as caught:
            spindle.Group.from_env()
        self.assertIn("SPINDLE_SIZE", caught.exception.detail)
        self.assertIn("four", caught.exception.detail)


if __name__ == "__main__":
    unittest.main()
