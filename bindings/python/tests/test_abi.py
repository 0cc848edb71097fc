# SPDX-License-Identifier: MIT
"""The ctypes structures match the installed headers: every size and field offset, as cc sees them."""

import ctypes
import os
import subprocess
import tempfile
import unittest

from orbit import _lib
from support import build_c


def c_type(name):
    return name if name == "orbit_key" else "struct " + name   # orbit_key is a typedef


class TestAbi(unittest.TestCase):
    def test_struct_layouts_match_the_headers(self):
        lines = ["#include <orbit/orbit.h>", "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
        for name, struct in _lib.STRUCTS.items():
            lines.append('printf("%s %%zu\\n", sizeof(%s));' % (name, c_type(name)))
            for field, *_ in struct._fields_:
                lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (name, field, c_type(name), field))
        lines += ["return 0;", "}"]
        with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as src:
            src.write("\n".join(lines) + "\n")
        self.addCleanup(os.unlink, src.name)
        c = dict(line.rsplit(" ", 1) for line in subprocess.run([build_c(src.name)], capture_output=True,
                                                                  text=True, check=True).stdout.splitlines())
        checked = 0
        for name, struct in _lib.STRUCTS.items():
            self.assertEqual(int(c[name]), ctypes.sizeof(struct), "sizeof(%s)" % name)
            for field, *_ in struct._fields_:
                self.assertEqual(int(c["%s.%s" % (name, field)]), getattr(struct, field).offset,
                                 "offsetof(%s, %s)" % (name, field))
                checked += 1
        self.assertGreater(checked, 150)


if __name__ == "__main__":
    unittest.main()
