#!/usr/bin/env python3
"""scripts/doc-check.py can fail: a broken link, a missing anchor, a line over 400
characters, a docs tree over its word budget and a section named by the code that is not a
heading each make it exit 1 naming the break; the clean tree exits 0."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "doc-check.py")


class DocCheck(unittest.TestCase):
    CLEAN = {
        "README.md": "# zt\n\nSee [the map](docs/architecture.md#adding-a-model-family).\n",
        "docs/architecture.md": "# Map\n\n## Adding a model family\n\n[log](../bench/results/x.md)\n",
        "bench/results/x.md": "# Log\n\n[back](../../docs/architecture.md)\n\n```\n[not a link](nowhere.md)\n```\n",
        "src/a.cpp": '// docs/architecture.md "Adding a model" and bench/results/x.md, "Log"\n'
                     'throw E("see docs/architecture.md, \\"Adding a model family\\"");\n',
    }

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = self.tmp.name
        for rel, text in self.CLEAN.items():
            self.write(rel, text)

    def write(self, rel, text):
        os.makedirs(os.path.join(self.root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(self.root, rel), "w") as f:
            f.write(text)

    def run_check(self):
        r = subprocess.run([sys.executable, SCRIPT, "--root", self.root], capture_output=True, text=True)
        return r.returncode, r.stdout

    def test_clean_tree_passes(self):
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)

    def test_missing_file_fails(self):
        self.write("docs/architecture.md", "# Map\n\n[log](../bench/results/gone.md)\n")
        rc, out = self.run_check()
        self.assertEqual(rc, 1)
        self.assertIn("docs/architecture.md:3: link to ../bench/results/gone.md", out)

    def test_missing_anchor_fails(self):
        self.write("README.md", "# zt\n\n[map](docs/architecture.md#adding-an-objective)\n")
        rc, out = self.run_check()
        self.assertEqual(rc, 1)
        self.assertIn("has no heading '#adding-an-objective'", out)

    def test_long_line_fails(self):
        self.write("docs/long.md", "# Long\n\n" + "word " * 81 + "\n")
        rc, out = self.run_check()
        self.assertEqual(rc, 1)
        self.assertIn("docs/long.md:3: 405 characters, over 400", out)

    def test_hint_to_missing_heading_fails(self):
        self.write("include/b.hpp", '// the rule (docs/architecture.md "Adding an objective")\n')
        rc, out = self.run_check()
        self.assertEqual(rc, 1)
        self.assertIn('include/b.hpp:1: names docs/architecture.md "Adding an objective", which is not a heading', out)
        self.write("include/b.hpp", 'const char* h = "docs/gone.md, \\"Keys\\"";\n')
        self.assertIn("include/b.hpp:1: names docs/gone.md, which does not exist", self.run_check()[1])
        self.write("include/b.hpp", "")
        self.write("docs/architecture.md", "# Map\n\n## Adding a model family\n\nAs in \"Adding a family\" above.\n")
        self.assertIn('docs/architecture.md:5: "Adding a family" is not a heading of this doc', self.run_check()[1])

    def test_word_budgets_fail(self):
        self.write("docs/architecture.md", "# Map\n\n## Adding a model family\n\n" + "w\n" * 1200)
        rc, out = self.run_check()
        self.assertEqual(rc, 1)
        self.assertIn("docs/architecture.md: 1207 words, the budget is under 1200", out)
        self.write("docs/big.md", "w\n" * 60000)
        self.assertIn("docs/*.md + README.md:", self.run_check()[1])


if __name__ == "__main__":
    unittest.main()
