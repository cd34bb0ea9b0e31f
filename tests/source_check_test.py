#!/usr/bin/env python3
"""scripts/source-check.py can fail: each rule broken in a small tree of three layers
(low < mid < top) must make it exit 1 naming the break, and the clean tree exit 0."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "source-check.py")

TABLE = """# Architecture

## Layers (lowest first; a layer uses only layers below it)

| layer | folders | owns | may use |
|---|---|---|---|
| low | `src/low` `include/zt/low` | the bottom | — |
| mid | `src/mid` `include/zt/mid` | the middle | low |
| top | `src/top` | the command | {top_uses} |

## Next
"""

CMAKE = "foreach(layer {order})\nendforeach()\n"


class SourceCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.write("docs/architecture.md", TABLE.format(top_uses="low, mid"))
        self.write("CMakeLists.txt", CMAKE.format(order="low mid top"))
        self.write("include/zt/low/a.hpp", "#pragma once\n#include <vector>\n")
        self.write("src/low/a.cpp", '#include "zt/low/a.hpp"\n#include "a_detail.hpp"\n')
        self.write("src/low/a_detail.hpp", "#pragma once\n")
        self.write("include/zt/mid/b.hpp", '#pragma once\n#include "zt/low/a.hpp"\n')
        self.write("src/mid/b.cpp", '#include "zt/mid/b.hpp"\n#include <zt/low/a.hpp>\n')
        self.write("src/top/main.cpp", '#include "zt/mid/b.hpp"\n#include "zt/version.hpp"\n')
        self.write("tests/low/test_a.cpp", "\n" * 600)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def run_check(self, check):
        r = subprocess.run([sys.executable, SCRIPT, check, "--root", self.root], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def test_clean_tree_passes(self):
        rc, out = self.run_check("all")
        self.assertEqual(rc, 0, out)
        self.assertIn("0 over 600 lines", out)
        self.assertIn("3 layers (low < mid < top)", out)

    def test_601_lines_fail(self):
        self.write("src/mid/big.cpp", "x\n" * 601)
        rc, out = self.run_check("lines")
        self.assertEqual(rc, 1, out)
        self.assertIn("src/mid/big.cpp: 601 lines", out)
        self.write("fuzz/last_line_open.cu", "x\n" * 600 + "y")  # 601 lines, no final newline
        self.assertIn("fuzz/last_line_open.cu: 601 lines", self.run_check("lines")[1])

    def test_upward_include_fails(self):
        self.write("src/low/a.cpp", '#include "zt/low/a.hpp"\n  #  include "zt/mid/b.hpp"\n')
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 1, out)
        self.assertIn("src/low/a.cpp:2: low includes include/zt/mid/b.hpp of layer mid: mid is above low", out)

    def test_relative_upward_include_fails(self):
        self.write("src/mid/c.cpp", '#include "../top/main.cpp"\n')
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 1, out)
        self.assertIn("src/mid/c.cpp:1: mid includes src/top/main.cpp of layer top: top is above mid", out)

    def test_lower_layer_not_listed_fails(self):
        self.write("docs/architecture.md", TABLE.format(top_uses="mid"))
        self.write("src/top/more.cpp", '#include "zt/low/a.hpp"\n')
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 1, out)
        self.assertIn("low is below top but not in top's 'may use' cell", out)

    def test_file_outside_layers_and_unresolved_include_fail(self):
        self.write("src/stray/x.cpp", "int x;\n")
        self.write("src/mid/d.cpp", '#include "nowhere.hpp"\n')
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 1, out)
        self.assertIn("src/stray/x.cpp: in no layer's folder", out)
        self.assertIn('src/mid/d.cpp:1: #include "nowhere.hpp": found neither', out)

    def test_angle_include_of_project_header_fails(self):
        # <a_detail.hpp> is low's private header, reachable only through an include directory.
        self.write("src/mid/e.cpp", "#include <a_detail.hpp>\n#include <vector>\n#include <zt/low/a.hpp>\n")
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 1, out)
        self.assertIn("src/mid/e.cpp:1: #include <a_detail.hpp> reaches the project file src/low/a_detail.hpp", out)
        self.assertNotIn("e.cpp:2", out)
        self.assertNotIn("e.cpp:3", out)
        # Upward through angle brackets: the layer rule sees it too.
        self.write("src/low/f.cpp", "#include <main.cpp>\n")
        out = self.run_check("layers")[1]
        self.assertIn("src/low/f.cpp:1: low includes src/top/main.cpp of layer top: top is above low", out)

    def test_include_directory_into_another_layer_fails(self):
        self.write("src/mid/CMakeLists.txt", "add_library(zt_mid b.cpp)\n"
                   "target_include_directories(zt_mid PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/gen\n"
                   "  ${PROJECT_SOURCE_DIR}/include)\n")
        self.assertEqual(self.run_check("layers")[0], 0)
        self.write("src/mid/CMakeLists.txt", "target_include_directories(zt_mid\n  PRIVATE ../low)\n"
                   "target_include_directories(zt_mid SYSTEM PRIVATE ${PROJECT_SOURCE_DIR}/src)\n")
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 1, out)
        self.assertIn("src/mid/CMakeLists.txt:1: target_include_directories adds src/low, a folder of layer low, "
                      "to mid", out)
        self.assertIn("src/mid/CMakeLists.txt:3: target_include_directories adds src, above the folders of low, "
                      "top, to mid", out)

    def test_cmake_order_checked(self):
        self.write("CMakeLists.txt", CMAKE.format(order="mid low"))
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 1, out)
        self.assertIn("is not in docs/architecture.md's order", out)

    def test_bad_table_is_exit_2(self):
        self.write("docs/architecture.md", TABLE.format(top_uses="mid").replace("| low |", "| mid |", 1))
        self.assertEqual(self.run_check("layers")[0], 2)
        self.write("docs/architecture.md", TABLE.format(top_uses="mid").replace("| the middle | low |",
                                                                                "| the middle | top |"))
        rc, out = self.run_check("layers")
        self.assertEqual(rc, 2, out)
        self.assertIn("mid may use top, which is not below it", out)
        self.write("docs/architecture.md", "# Architecture\n\nno table\n")
        self.assertEqual(self.run_check("layers")[0], 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
