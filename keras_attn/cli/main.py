"""`keras-attn`: the entry of the command line, and `keras-attn layers`.

The commands register through `COMMANDS`: each entry adds its parser to the
subparsers and names the function that runs it. `main` imports TensorFlow quietly
(`keras_attn.startup`) before a command runs, and turns what a command raises about
its input (a `ValueError`, a file that cannot be opened) into one line on stderr
naming the argument, exit status 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import re
import sys

from keras_attn import __version__
from keras_attn.cli.arguments import message
from keras_attn.cli.quickstart import add_quickstart
from keras_attn.cli.serving import add_inspect, add_predict
from keras_attn.cli.train import add_train
from keras_attn.startup import import_tensorflow

__all__ = ["COMMANDS", "build_parser", "main"]


def _layers(args: argparse.Namespace) -> int:
    import keras_attn.layers as layers

    for name in layers.__all__:
        obj = getattr(layers, name)
        if not isinstance(obj, type):
            continue
        summary = (obj.__doc__ or "").strip().splitlines()[0] if obj.__doc__ else ""
        print(f"{name:28s} {summary}")
    return 0


def _add_layers(subparsers) -> None:
    parser = subparsers.add_parser("layers", help="list the public layers")
    parser.set_defaults(func=_layers)


#: Functions that each add one subcommand to the subparsers.
COMMANDS = [
    _add_layers,
    add_quickstart,
    add_train,
    add_predict,
    add_inspect,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="keras-attn",
        description="Attention layers and models for recommenders and NLP "
        "(Keras 3, or Keras 2 with TF_USE_LEGACY_KERAS=1).",
    )
    parser.add_argument("--version", action="version", version=__version__)
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an error (anywhere on the line)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug anywhere on the line (`keras-attn train ctr ... --debug` too).
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    # Before any command imports TensorFlow: its native start-up lines (oneDNN,
    # CUDA) stay off the terminal unless the user set TF_CPP_MIN_LOG_LEVEL.
    import_tensorflow()
    try:
        return args.func(args)
    except Exception as error:
        if debug or not _about_the_input(error):
            raise
        command = " ".join(a for a in argv[:2] if not a.startswith("-"))
        print(f"keras-attn {command}: error: {message(error)}", file=sys.stderr)
        return 2


def _about_the_input(error: BaseException) -> bool:
    """A usage error: bad arguments or input data, not a bug of the package."""
    if isinstance(error, (ValueError, OSError)):
        return True
    import tensorflow as tf

    # A bad value met in a data pipeline, raised by keras_attn's reader.
    return isinstance(error, tf.errors.OpError) and bool(
        re.search(r"\bValueError: ", getattr(error, "message", ""))
    )


if __name__ == "__main__":
    sys.exit(main())
