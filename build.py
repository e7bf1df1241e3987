#!/usr/bin/env python3
"""TinyGPT's one command. `python build.py` builds dist/; `python build.py serve
[--port N]` serves it with production headers and rebuilds on edits;
`python build.py test` builds, type-checks and runs every test; `python build.py
cli` bundles the Node tools into dist-cli/."""
import sys

from tinygpt.site_build.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
