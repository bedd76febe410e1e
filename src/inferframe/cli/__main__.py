"""``python -m inferframe.cli``: the command line (see :mod:`inferframe.cli`)."""

from inferframe.cli import main

if __name__ == "__main__":
    main()
