"""`keras-attn`, the command line: `train ctr|text`, `quickstart`, `predict`,
`inspect`, `layers`.

One module a command (`train`, `quickstart`, `serving` for predict and inspect) and
one entry, `main` (the `keras-attn` console script). TensorFlow's native start-up
lines stay off the terminal unless `TF_CPP_MIN_LOG_LEVEL` is set: `main` imports
TensorFlow quietly first, and the commands import TensorFlow and the rest of
keras_attn inside their functions, so `--help` loads neither.
"""

from keras_attn.cli.main import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
