"""--lang zh tells the same cause and fix as English, from the same facts: on every sample and every lab case the
verdict's text (sentence, culprit, step, why, fix, next) names the same numbers (ranks, steps, lines, sizes) and the
same files in both languages. Also the sentence memory's own rules (reports/zh_sentences.py)."""
from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor

import pytest

from postmortem.reports.translate import sentence_zh, split_sentences, to_zh
from postmortem.reports.zh_sentences import ZH_SENTENCES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(ROOT, "benchmarks", "lab", "cases")
SAMPLES = os.path.join(ROOT, "samples")
CASES = sorted([os.path.join(SAMPLES, d, "logs") for d in os.listdir(SAMPLES)
                if os.path.isdir(os.path.join(SAMPLES, d, "logs"))]
               + [os.path.join(LAB, d) for d in os.listdir(LAB) if os.path.isdir(os.path.join(LAB, d))])

_NUM = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:-(\d+))?(?!\w)")
_FILE = re.compile(r"[\w./-]+\.(?:py|log|json|jsonl|txt|out|err|pt|pth|ckpt|safetensors|yaml|sh)\b")
_ENDS = {"en": ("EVIDENCE", "OTHER FINDINGS", "EVIDENCE GAPS", "INPUT"), "zh": ("证据", "其他发现", "缺失的证据", "输入")}


def facts(text: str) -> tuple[set, set]:
    """(numbers, file names) a text names; a rank range `0-3` counts as each rank in it."""
    nums = set()
    for m in _NUM.finditer(text):
        a, b = m.group(1), m.group(2)
        if b and "." not in a and 0 < int(b) - int(a) <= 64:
            nums |= {str(x) for x in range(int(a), int(b) + 1)}
        else:
            nums |= {a} | ({b} if b else set())
    return nums, set(_FILE.findall(text))


def verdict_body(text: str, lang: str) -> str:
    """The verdict's lines of a text report, after its header line, before the evidence."""
    out = []
    for line in text.splitlines()[1:]:
        if line.startswith(_ENDS[lang]):
            break
        out.append(line.strip())
    return " ".join(out)


def _both(path: str) -> tuple[str, str, str]:
    import postmortem
    a = postmortem.analyze(path, quiet=True)
    if a.verdict is None:
        return path, "", ""
    return path, verdict_body(a.to_text("en"), "en"), verdict_body(a.to_text("zh"), "zh")


@pytest.fixture(scope="module")
def rendered() -> dict:
    with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return {p: (en, zh) for p, en, zh in pool.map(_both, CASES, chunksize=4)}


def test_en_and_zh_name_the_same_facts_on_every_sample_and_lab_case(rendered):
    assert len(rendered) >= 200
    differ = []
    for path, (en, zh) in sorted(rendered.items()):
        if facts(en) != facts(zh):
            (ne, fe), (nz, fz) = facts(en), facts(zh)
            differ.append(f"{os.path.relpath(path, ROOT)}: numbers only in en {sorted(ne - nz)}, only in zh "
                          f"{sorted(nz - ne)}; files only in en {sorted(fe - fz)}, only in zh {sorted(fz - fe)}")
    assert not differ, "\n".join(differ[:20])


def test_the_chinese_is_mostly_chinese(rendered):
    """Sentences no pattern knows stay English (quoted messages mostly); the verdicts' own sentences are translated."""
    han = sum(len(re.findall(r"[\u4e00-\u9fff]", zh)) for _, zh in rendered.values())
    latin = sum(len(re.findall(r"\b[a-z]{4,}\b", zh)) for _, zh in rendered.values())
    assert han > 5 * latin, (han, latin)


# --- the sentence memory -------------------------------------------------------------------------------------

@pytest.mark.parametrize("english,chinese", ZH_SENTENCES)
def test_every_pattern_puts_every_fact_back_and_adds_none(english, chinese):
    names = re.findall(r"\{([a-z_]+)\}", english)
    assert sorted(set(names)) == sorted(set(re.findall(r"\{([a-z_]+)\}", chinese))), english
    # a number in the pattern's own words is in the Chinese too, and the Chinese adds none
    assert facts(re.sub(r"\{[a-z_]+\}", " ", english))[0] == facts(re.sub(r"\{[a-z_]+\}", " ", chinese))[0], english


def test_a_sentence_is_translated_with_its_facts_and_an_unknown_one_stays_english():
    s = ("The earliest exception that is not a timeout or a closed connection is ValueError: sample 1843 has 0 tokens "
         "after filtering (shard 2, step 7) on rank 2.")
    zh = sentence_zh(s)
    assert zh is not None and "rank 2" in zh and "sample 1843 has 0 tokens" in zh and zh.endswith("。")
    text, done, total = to_zh(s + " This is an internal miniz error.")
    assert (done, total) == (1, 2) and text.endswith("This is an internal miniz error.")
    assert split_sentences("A. B c. d") == ["A.", "B c.", "d"]


def test_rank_phrases_read_as_chinese():
    zh = sentence_zh("In the stack dumps, ranks 0, 1 and 2 wait in a collective while rank 3 is in compute: innermost "
                     "frame encoder_forward (train.py:50).")
    assert "rank 0、1、2" in zh and "rank 3" in zh and "计算" in zh and "encoder_forward (train.py:50)" in zh
