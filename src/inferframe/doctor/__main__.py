"""``python -m inferframe.doctor``: the doctor's table (``--install-check``: the install's self-test)."""

import sys

from inferframe.doctor.run import main

sys.exit(main())
