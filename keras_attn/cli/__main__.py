"""`python -m keras_attn.cli`: the `keras-attn` command."""

import sys

from keras_attn.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
