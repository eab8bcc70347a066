"""iter_lines(start=N) skips the lines before N in bytes: the same numbered lines as reading them all."""
import gzip
import random

import pytest

from postmortem.ingest import textio

PIECES = [b"hello", "é日本".encode(), b"\xe2\x82", b"\xff", b"\r", b"\x1b[31m", b"\x00", b"x" * 100, b"  ",
          b"\xef\xbb\xbf"]


@pytest.mark.parametrize("seed", range(40))
def test_lines_from_a_start_equal_the_tail_of_all_lines(tmp_path, seed):
    rnd = random.Random(seed)
    lines = [b"".join(rnd.choices(PIECES, k=rnd.randint(0, 5))) for _ in range(rnd.randint(0, 300))]
    data = (b"\xef\xbb\xbf" if seed % 7 == 0 else b"") + b"\n".join(lines) + (b"\n" if seed % 3 else b"")
    path = tmp_path / ("f.log.gz" if seed % 5 == 0 else "f.log")
    path.write_bytes(gzip.compress(data) if seed % 5 == 0 else data)
    every = list(textio.iter_lines(str(path)))
    for start in (1, 2, rnd.randint(1, len(every) + 3), len(every), len(every) + 5):
        assert list(textio.iter_lines(str(path), start=start)) == [x for x in every if x[0] >= start]


def test_utf16_is_read_from_the_start(tmp_path):
    path = tmp_path / "w.log"
    path.write_bytes("line one\nline two\nline three\n".encode("utf-16"))
    assert list(textio.iter_lines(str(path), start=3))[-1] == (3, "line three")
