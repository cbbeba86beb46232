#!/usr/bin/python3
"""Runs a shell script on a pseudo-terminal of its own, as a root shell on a terminal would
run it: the script's shell is the session leader and the pty its controlling terminal.
Prints everything the terminal showed. With --ctrl-c-after S, types Ctrl-C (the terminal's
interrupt character) S seconds after the line READY appears.
Usage: pty_run.py [--ctrl-c-after S] [--timeout S] SCRIPT"""
import argparse
import os
import pty
import select
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ctrl-c-after", type=float, default=None)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("script")
    a = p.parse_args()
    pid, fd = pty.fork()  # the child: setsid, the pty slave as controlling terminal on 0-2
    if pid == 0:
        os.execv("/bin/bash", ["bash", "--norc", "--noprofile", a.script])
    seen = b""
    deadline = time.monotonic() + a.timeout
    ready_at = None
    sent = False
    while time.monotonic() < deadline:
        if a.ctrl_c_after is not None and ready_at is None and b"READY" in seen:
            ready_at = time.monotonic()
        if ready_at is not None and not sent and time.monotonic() - ready_at >= a.ctrl_c_after:
            os.write(fd, b"\x03")
            sent = True
        r, _, _ = select.select([fd], [], [], 0.1)
        if fd in r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: every holder of the slave closed it
                break
            if not chunk:
                break
            seen += chunk
    else:
        os.kill(pid, 9)
        seen += b"\npty_run: TIMEOUT\n"
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(seen.decode("utf-8", "replace").replace("\r\n", "\n"))
    sys.stdout.write("\npty_run: exit %d\n" % (os.waitstatus_to_exitcode(status)))


if __name__ == "__main__":
    main()
