"""The ctypes mirrors against the C headers.

Two checks per structure: the C compiler's sizeof, alignment and offsetof of
every mirrored field equal ctypes' (a program generated from the mirrors and
compiled against the headers), and the field names the header declares are
the mirror's, in order (so a field added to the header and not to the
mirror fails here even where it would fit in trailing padding)."""

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import support
from spindle import _lib

HEADERS = ["spindle/group.h", "spindle/p2p.h", "spindle/view.h", "spindle/setup.h"]


def c_program():
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += [f"#include <{h}>" for h in HEADERS]
    lines += ["int main(void)", "{"]
    for c_name, mirror in _lib.STRUCTS.items():
        lines.append(
            f'    printf("{c_name} size %zu align %zu\\n", sizeof(struct {c_name}), '
            f"_Alignof(struct {c_name}));"
        )
        for field, _ in mirror._fields_:
            lines.append(
                f'    printf("{c_name}.{field} offset %zu size %zu\\n", '
                f"offsetof(struct {c_name}, {field}), "
                f"sizeof(((struct {c_name} *)0)->{field}));"
            )
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def python_layout():
    lines = []
    for c_name, mirror in _lib.STRUCTS.items():
        lines.append(
            f"{c_name} size {ctypes.sizeof(mirror)} align {ctypes.alignment(mirror)}"
        )
        for field, ctype in mirror._fields_:
            offset = getattr(mirror, field).offset
            lines.append(f"{c_name}.{field} offset {offset} size {ctypes.sizeof(ctype)}")
    return lines


def declared_fields(c_name):
    """Field names of `struct c_name { ... };` in the public headers."""
    text = "\n".join(support.header(h.split("/")[1]) for h in HEADERS)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    match = re.search(r"struct\s+" + c_name + r"\s*\{(.*?)\n\};", text, flags=re.S)
    if match is None:
        raise AssertionError(f"struct {c_name} is not defined in {HEADERS}")
    names = []
    for declaration in match.group(1).split(";"):
        declaration = " ".join(declaration.split())
        if not declaration:
            continue
        pointer_to_function = re.match(r".*\(\s*\*\s*(\w+)\s*\)", declaration)
        if pointer_to_function:
            names.append(pointer_to_function.group(1))
            continue
        # "type a, b" or "type *a" or "type a[N]": the declarators' names.
        first, *rest = declaration.split(",")
        declarators = [first.split()[-1]] + rest
        for declarator in declarators:
            names.append(re.sub(r"\[.*\]", "", declarator).strip(" *"))
    return names


class LayoutTest(unittest.TestCase):
    def test_every_mirror_has_the_header_fields_in_order(self):
        for c_name, mirror in _lib.STRUCTS.items():
            with self.subTest(struct=c_name):
                self.assertEqual(
                    [field for field, _ in mirror._fields_],
                    declared_fields(c_name),
                    f"struct {c_name}: spindle/_lib.py and the header disagree",
                )

    def test_sizes_and_offsets_match_the_c_compiler(self):
        compiler = os.environ.get("SPINDLE_CC") or shutil.which("cc")
        if not compiler:
            self.skipTest("no C compiler (set SPINDLE_CC)")
        with tempfile.TemporaryDirectory(prefix="spindle-layout-") as work:
            source = os.path.join(work, "layout.c")
            program = os.path.join(work, "layout")
            with open(source, "w", encoding="utf-8") as f:
                f.write(c_program())
            built = subprocess.run(
                [compiler, "-std=c11", "-I", support.INCLUDE_DIR, "-o", program, source],
                capture_output=True,
                text=True,
            )
            self.assertEqual(built.returncode, 0, f"{compiler} failed:\n{built.stderr}")
            printed = subprocess.run([program], capture_output=True, text=True, check=True)
        c_lines = printed.stdout.splitlines()
        self.assertEqual(len(c_lines), len(python_layout()))
        for c_line, python_line in zip(c_lines, python_layout()):
            self.assertEqual(python_line, c_line, "ctypes (first) and C (second) disagree")

    def test_replay_kinds_are_the_headers(self):
        text = re.sub(r"/\*.*?\*/", "", support.header("group.h"), flags=re.S)
        enum = re.search(r"enum spindle_replay_kind \{(.*?)\};", text, flags=re.S)
        self.assertIsNotNone(enum, "enum spindle_replay_kind is not in group.h")
        declared = {
            name: int(value)
            for name, value in re.findall(r"SPINDLE_REPLAY_(\w+)\s*=\s*(\d+)", enum.group(1))
        }
        self.assertEqual(
            declared, {"SNAPSHOT": _lib.REPLAY_SNAPSHOT, "MESSAGE": _lib.REPLAY_MESSAGE}
        )


if __name__ == "__main__":
    unittest.main()
