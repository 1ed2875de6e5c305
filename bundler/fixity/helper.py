"""The entry point of a fixity helper process (``bundler.fixity.execute.HelperPool``):
``python -m bundler.fixity.helper --fixity-helper PARENT_PID``."""

import sys

from bundler.fixity.execute import HELPER_FLAG, helper_main

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != HELPER_FLAG or not sys.argv[2].isdigit():
        sys.exit("usage: python -m bundler.fixity.helper --fixity-helper PARENT_PID")
    helper_main(int(sys.argv[2]))
