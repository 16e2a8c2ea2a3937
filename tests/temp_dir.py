"""A base for the script tests that write files: each test gets a fresh
temporary folder, `self.dir`, removed when the test ends (passed or not)."""

import tempfile
import unittest
from pathlib import Path


class TempDirTestCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
