# SPDX-License-Identifier: MIT
# Non-ASCII function and file names: héllo_wörld (Latin-1), 日本語 (UCS-2), and 𠀀_astral
# (outside the BMP) call each other; the innermost sleeps on the line marked SLEEP. Prints "ready".
import sys
import time


def 𠀀_astral():
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)  # SLEEP


def 日本語():
    𠀀_astral()  # CALL-ASTRAL


def héllo_wörld():
    日本語()  # CALL-JP


héllo_wörld()
