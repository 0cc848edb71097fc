# SPDX-License-Identifier: MIT
"""The suite's entry point (run.sh): unittest, and one summary line counting tests, not subtests.

    python -m runner [-v] [test_module[.Class[.test]] ...]

The last line is "N passed, N failed, N skipped" (a test with a failing subtest counts once);
./orbit test reads it. Exit 0 when everything passed.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    names = [a for a in argv if not a.startswith("-")]
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromNames(names) if names else loader.discover(HERE, top_level_dir=HERE)
    result = unittest.TextTestRunner(verbosity=2 if "-v" in argv else 1).run(suite)
    failed = {getattr(t, "test_case", t).id() for t, _ in result.failures + result.errors +
              result.unexpectedSuccesses}
    skipped = len(result.skipped)
    print("%d passed, %d failed, %d skipped" % (result.testsRun - len(failed) - skipped, len(failed), skipped))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
