"""``python -m inferframe``: the command line (see ``inferframe.cli``)."""

from inferframe.cli import main

if __name__ == "__main__":
    main()
