"""A clean job with awkward output: partial lines, progress-bar carriage returns, non-UTF-8 bytes, 1 MB of lines.

Usage: echo_job.py [exit_code]. Output is deterministic so that a wrapped run can be compared byte for byte.
"""
import sys
import time

out, err = sys.stdout.buffer, sys.stderr.buffer
out.write(b"starting job\n")
err.write(b"a warning on stderr\n")
out.write(b"partial line without newline, ")
out.flush()
time.sleep(0.2)
out.write(b"finished later\n")
for i in range(5):
    err.write(b"\rprogress %d/5" % (i + 1))
    err.flush()
err.write(b"\n")
out.write(b"bytes that are not UTF-8: \xff\xfe\x00 and unicode \xe2\x9c\x93\r\n")
for i in range(20000):
    out.write(b"step %05d loss 1.2345 some padding to make the line longer than usual ......\n" % i)
out.write(b"no newline at the very end")
out.flush()
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
