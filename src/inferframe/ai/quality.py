"""The quality guard for AI operators: the checks of ``inferframe.observe.quality`` (see there), under the ai layer's name.

Example:
    >>> same_answer({"yes": 20}).summary
    '20/20 yes'
"""

from inferframe.observe.quality import (FIX, FIX_EXAMPLES, MIN_ROWS, MIN_SWAPS, SAME_SHARE, Measurement, all_yes, binomial_tail,
                                        message, same_answer, swap_agreement, warn_low_information)

__all__ = ["FIX", "FIX_EXAMPLES", "MIN_ROWS", "MIN_SWAPS", "SAME_SHARE", "Measurement", "all_yes", "binomial_tail", "message",
           "same_answer", "swap_agreement", "warn_low_information"]
