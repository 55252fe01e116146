#!/usr/bin/python3
"""gcide_to_text.py: the GNU Collaborative International Dictionary of English
(Debian package dict-gcide) as plain UTF-8 text, one entry per paragraph.

    /usr/bin/python3 scripts/run/gcide_to_text.py -o data/gcide.txt

Reads the dictd database the package installs: gcide.index (one line per
headword: the word, then the entry's byte offset and length in dictd's base-64
digits) and gcide.dict.dz (the entries; dictzip is gzip with an index in the
header's extra field, so the gzip module reads it). Python 3 standard library
only. Same package, same output bytes.

An entry is a byte range of the data file; several headwords may share one
(the index is deduplicated). The four dictd header entries (00-database-url,
-short, -long, -info; GCIDE's 00-gcide-* and 00-web1913-info are the same
ranges) are dropped. Entries are written in the order of the data file, which
is alphabetical.

The data is the dictd rendering of GCIDE's SGML: ASCII text laid out in
indented blocks (senses, notes, quotations, synonyms) separated by blank lines,
with this markup, which becomes plain text:

  Abandon \\A*ban"don\\       headword with syllable breaks (*) and primary (")
                              and secondary (`) stress: "Abandon" (the form
                              between the backslashes wins, so "Tete-a-tete
                              \\T[^e]te`-[`a]-t[^e]te"\\" gives "Tête-à-tête")
  ([.a]*b[a^]n"d[u^]n)        Webster's respelling for pronunciation: kept, with
                              "*" -> "-", primary " -> U+2032 PRIME, secondary
                              ` -> U+2035 REVERSED PRIME: "(ȧ-băn′dŭn)"
  [a^] [=e] ['e] ["o] [ae]    character codes -> Unicode (ENTITIES below):
  [root] [deg] [alpha] ...    ă ē é ö æ √ ° α; an unknown bracket is kept as
                              text ([Obs.], [R.], [F. abandonner ...] are text)
  {Abandoned} {Gre*ga"ri*ous*ly}
                              cross-references and run-on forms: braces
                              dropped, syllable and stress marks removed
  [1913 Webster] [WordNet 1.5] [PJC] ...
                              source tags after each block: dropped
  abortion[2]                 WordNet sense references: the number is dropped

dictd's conversion also left, at the end of some 5,000 entries, the headwords
of the next entries once more ("...the Great on the other. --Macaulay.
[1913 Webster] C[ae]sarean"): they are recognised against the index (the
headwords of the next 8 entries) and dropped. The first entry ("0") loses the
epigraph of GCIDE's file for the letter A.

Layout of the output: each block of an entry becomes one line (its lines
joined, runs of spaces collapsed), so an entry is a paragraph of lines, and
entries are separated by one blank line. Greek in etymologies stays in GCIDE's
ASCII transliteration ("Gr. lo`gos"), and "?" marks characters the source had
already lost.

--limit N cleans only the first N entries (for quick checks). The output is
written to a temporary file and renamed, so a failed run leaves nothing
behind. Prints one line: entries, bytes, output file.
"""
import argparse
import gzip
import os
import re
import sys
import unicodedata

DICT_DIR = "/usr/share/dictd"

# ----------------------------------------------------------------- input

B64_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
B64_VALUE = {c: i for i, c in enumerate(B64_DIGITS)}


def b64_number(s):
    """dictd's base-64 numbers: most significant digit first."""
    n = 0
    for c in s:
        n = n * 64 + B64_VALUE[c]
    return n


def read_index(path):
    """Returns the entries as sorted (offset, length, headwords) triples,
    without the dictd header entries."""
    ranges = {}
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.rstrip(b"\n").split(b"\t")
            if len(fields) != 3:
                raise ValueError("%s:%d: expected 3 tab-separated fields" % (path, lineno))
            word = fields[0].decode("latin-1")
            key = (b64_number(fields[1].decode("ascii")), b64_number(fields[2].decode("ascii")))
            ranges.setdefault(key, []).append(word)
    return sorted((off, length, words) for (off, length), words in ranges.items()
                  if not any(w.startswith("00-database-") for w in words))


# The data is ASCII but for three stray bytes (v0.48): a Windows-1252
# apostrophe, a Latin-1 c-cedilla, and 0xB9 used as an apostrophe.
STRAY_BYTES = {0x92: "\u2019", 0xB9: "\u2019", 0xE7: "\u00e7"}


def decode(data):
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        return "".join(chr(b) if b < 0x80 else STRAY_BYTES.get(b, bytes([b]).decode("cp1252", "replace"))
                       for b in data)


# ----------------------------------------------------------------- characters

COMBINING = {
    "=": "\u0304",   # [=a] macron: long vowel, ā
    "^": "\u0302",   # [^o] circumflex, ô
    "'": "\u0301",   # ['e] acute, é
    "`": "\u0300",   # [`a] grave, à
    '"': "\u0308",   # ["o] diaeresis, ö
    "~": "\u0303",   # [~e] tilde, ẽ (Webster's "fern"), ñ
    ",": "\u0327",   # [,c] cedilla, ç
    "*": "\u030a",   # [*a] ring, å
}
BREVE = "\u0306"                 # [a^] short vowel, ă
SEMILONG = "\u0304\u030d"        # [-e] semilong vowel: macron with a vertical mark, ē̍
DOT_ABOVE, DOT_BELOW = "\u0307", "\u0323"

ENTITIES = {
    "asl": "a" + SEMILONG, "imac": "\u012b", "aum": "\u00e4",
    "add": "a\u0324", "udd": "\u1e73",            # a, u with two dots below (Webster's "all", "rude")
    "oo^": "o\u035do", "=oo": "o\u035eo",         # Webster's short and long "oo" (foot, food)
    "=ae": "\u01e3", "=O": "\u014c",
    "ae": "\u00e6", "AE": "\u00c6", "oe": "\u0153", "OE": "\u0152",
    "ng": "\u014b", "th": "t\u035fh",             # ng as in ink; voiced th (then)
    "eth": "\u00f0", "Edh": "\u00d0", "thorn": "\u00fe", "yogh": "\u021d",
    "root": "\u221a", "cuberoot": "\u221b", "deg": "\u00b0", "min": "\u2032", "sec": "\u2033",
    "bprime": "\u2032", "sect": "\u00a7", "para": "\u00b6", "pounds": "\u00a3",
    "middot": "\u00b7", "times": "\u00d7", "divby": "\u00f7", "div": "\u00f7", "rarr": "\u2192",
    "ldqo": "\u201c", "rdqo": "\u201d", "rsquo": "\u2019", "dagger": "\u2020", "dag": "\u2020",
    "flat": "\u266d", "sharp": "\u266f", "natural": "\u266e", "hand": "\u261e",
    "crescent": "\u23d1", "breve": "\u02d8", "umlaut": "\u00a8", "asterism": "\u2042",
    "asper": "\u02bd", "spasp": "\u02bd", "sigmat": "\u03c2", "digamma": "\u03dd",
    "ccaron": "\u010d", "cacute": "\u0107", "zdot": "\u017c", "schwa": "\u0259",
    "nabla": "\u2207", "filig": "\ufb01", "fllig": "\ufb02", "ffllig": "\ufb04",
    "upslur": "\u2323", "downslur": "\u2322", "ounceap": "\u2125",
    "dsdot": "\u1e0d", "lsdot": "\u1e37", "tsdo": "\u1e6d", "mdot": "\u1e41",
    "mtil": "m\u0303", "ncir": "n\u0302", "bar": "|",
    "astascending": "\u260a", "astdescending": "\u260b", "mercury": "\u263f",
    "taurus": "\u2649", "libra": "\u264e", "scorpio": "\u264f", "sagittarius": "\u2650",
    "pisces": "\u2653",
    "nbsp": " ", "colret": " ", "sb": " ", "break": "", "lbrace2": "", "rbrace2": "",
}
GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron "
         "pi rho sigma tau upsilon phi chi psi omega").split()
for i, name in enumerate(GREEK):
    small = chr(0x3b1 + i + (i >= 17))   # no capital of final sigma: skip U+03A2 / U+03C2
    ENTITIES[name] = small
    ENTITIES[name.capitalize()] = small.upper()
    ENTITIES[name.upper()] = small.upper()
ZODIAC = {"Aries": "\u2648", "Taurus": "\u2649", "Gemini": "\u264a", "Cancer": "\u264b",
          "Leo": "\u264c", "Virgo": "\u264d", "Libra": "\u264e", "Scorpio": "\u264f",
          "Sagittarius": "\u2650", "Capricorn": "\u2651", "Aquarius": "\u2652", "Pisces": "\u2653",
          "Jupiter": "\u2643", "Sun": "\u2609"}


def entity(code):
    """The text for a bracketed code, or None if it is not one."""
    if code in ENTITIES:
        return ENTITIES[code]
    m = re.fullmatch(r"([=^'`\"~,*.-])([A-Za-z])|([A-Za-z])\^", code)
    if not m:
        m = re.fullmatch(r"frac(\d)(\d+)", code)
        return m.group(1) + "/" + m.group(2) if m else None
    if m.group(3):
        return m.group(3) + BREVE
    mark, letter = m.group(1), m.group(2)
    if mark == "-":
        return letter + SEMILONG
    if mark == ".":   # Webster's a, e, o (ask, event, obey): dot above; u (full) and
        # transliterated consonants (Skr. [.r], Hind. [.t]): dot below
        return letter + (DOT_ABOVE if letter in "aeioc" else DOT_BELOW)
    return letter + COMBINING[mark]


ENTITY_RE = re.compile(r"\[([^\[\]\s]{1,14})\]")


def map_entities(s):
    def one(m):
        t = entity(m.group(1))
        return m.group(0) if t is None else t
    return ENTITY_RE.sub(one, s)


# ----------------------------------------------------------------- markup

# Source tags: "[1913 Webster]", "[Webster 1913 Suppl. +PJC]", "[WordNet 1.5 + AS]"...
# A tag may be broken across lines: "[1913\n   Webster + WordNet 1.5]".
SOURCE = (r"(?:1913\s+Webster|Webster\s+1913\s+Suppl\.|Word[Nn]et\s+(?:1\.[56]|sense\s+[0-9]+(?:\s*[-+&,]\s*[0-9]+)*)"
          r"|Century\s+Dict(?:\.|ionary),?\s*(?:1906\.?)?|PJC\.?|AS|CM|RDH|RHUD|RP|GG|JG|PC|MW10|MI11|#here)")
# A few lack the closing bracket at the end of their line: "[WordNet 1.5\n".
TAG = r"\[\s*\+?\s*%s(?:[\s+-]*%s)*(?:\s*\]|[ \t]*(?=\n|\Z))" % (SOURCE, SOURCE)
TAG_RE = re.compile(TAG)
TAG_THEN_HEADWORD_RE = re.compile(TAG + r"[ \t]+(?=\S[^\n]*\\)")   # a tag, then a new entry on its line
# "[1913 Webster] Abelite\n   Abelian" at the end of an entry: the headwords of
# the next entries again (dictd's conversion left them), one short name a line.
NAME = r"[ \t]*\{?-?[A-Za-z0-9](?:[A-Za-z0-9 '-]|\[[^\[\]\s]{1,8}\]){0,40}\}?[ \t]*"
NAME_RE = re.compile(NAME)
SENTENCE_ENDS = (".", "]", ")", "!", "?", '"')
NAMES_AFTER_SENTENCE_RE = re.compile(r"[.\])!?\"]((?:[ \t]+[^\s.\[\]{}]+){1,6})[ \t]*\Z")
TRAILING_TAG_RE = re.compile(TAG + r"[ \t]+%s(?:\n%s)*\Z" % (NAME, NAME))

CODE = r"\[[^\[\]\s]{1,14}\]"
# A headword between backslashes: letters, codes, marks; no space at either end.
HEADWORD_RE = re.compile(r"\\((?:%s|[A-Za-z0-9*\"`'./,&+()-])"
                         r"(?:(?:%s|[A-Za-z0-9 \n*\"`'./,&+()-]){0,198}(?:%s|[A-Za-z0-9*\"`'./,&+()-]))?)\\"
                         % (CODE, CODE, CODE))
PRON_AFTER_HEADWORD_RE = re.compile(r"[ \t]*\(([^()]*)\)")
PAREN_RE = re.compile(r"\(([^()]*)\)")
# A respelling: letters, codes, marks, digits (section numbers), "or", ";".
PRON_RE = re.compile(r"(?:%s|[-A-Za-z?*\"`'; ,0-9\n])*" % CODE)
BRACE_RE = re.compile(r"\{([^{}]*)\}")
MARKED_FORM_RE = re.compile(r"[A-Za-z\]][*\"`]|[*\"`][A-Za-z\[]")
FORM_RE = re.compile(r"(?:%s|[A-Za-z0-9 \n*\"`'.,-])+" % CODE)
SENSE_REF_RE = re.compile(r"(?<=[A-Za-z])\[(?:[0-9]{1,2}|wn[0-9]|n[0-9])\]")
ZODIAC_RE = re.compile(r"(?<=[(\[])\[(%s)\](?=[)\]])" % "|".join(ZODIAC))
# A numbered sense "   1. To cast..." or "      (a) ..." at the start of a source line.
SENSE_START_RE = re.compile(r"\n(?=[ \t]{1,8}(?:[0-9]{1,2}\.|\([a-z]\)) )")
# The first entry of the data opens with the epigraph of GCIDE's file for "A".
EPIGRAPH_RE = re.compile(r"\A\s*\n(?:[ \t]+\S[^\n]*\n)+(?=[^\s\\][^\n]*\\)")
SPACE_RE = re.compile(r"[ \t\n\r\f\v]+")
BLOCK_SEP_RE = re.compile(r"\n[ \t]*\n")
NOT_ALNUM_RE = re.compile(r"[\W_]+")   # combining marks included


def spelling(s):
    """A headword or run-on form without syllable and stress marks."""
    s = map_entities(s)
    s = re.sub(r"(?<=[^\W\d_])/(?=[^\W\d_])", "", s)   # "Tra"cer/y": a slash for a syllable break
    return SPACE_RE.sub(" ", s.replace("*", "").replace('"', "").replace("`", "")).strip()


def pronunciation(s):
    s = map_entities(s)
    return s.replace("*", "-").replace('"', "\u2032").replace("`", "\u2035")


def fold(s):
    """Letters only, lower case, accents removed: to compare a headword with
    its marked-up form."""
    s = unicodedata.normalize("NFD", s.replace("\u00e6", "ae").replace("\u00c6", "AE")
                              .replace("\u0153", "oe").replace("\u0152", "OE"))
    return NOT_ALNUM_RE.sub("", s).lower()


def drop_plain_copy(prev, word):
    """prev without its last words if they are `word` in plain letters: the
    dictd line "Abandon \\A*ban"don\\" repeats the headword without marks."""
    n = len(word.split())
    if n == 0:
        return prev
    m = re.search(r"(\S+(?:\s+\S+){%d})\s*\Z" % (n - 1), prev)
    if m and fold(m.group(1)) == fold(word):
        return prev[:m.start()]
    return prev


def replace_headwords(text):
    out, pos = [], 0
    for m in HEADWORD_RE.finditer(text):
        if m.start() < pos:
            continue
        word = spelling(m.group(1))
        out.append(drop_plain_copy(text[pos:m.start()], word))
        out.append(word)
        pos = m.end()
        pm = PRON_AFTER_HEADWORD_RE.match(text, pos)
        if pm:
            out.append(text[pos:pm.start(1) - 1] + "(" + pronunciation(pm.group(1)) + ")")
            pos = pm.end()
    out.append(text[pos:])
    return "".join(out)


def replace_parens(text):
    def one(m):
        inner = m.group(1)
        if ('"' in inner or "*" in inner) and PRON_RE.fullmatch(inner) and not re.search(r'(^|\s)"', inner):
            return "(" + pronunciation(inner) + ")"
        return m.group(0)
    return PAREN_RE.sub(one, text)


def replace_braces(text):
    def one(m):
        inner = m.group(1)
        if MARKED_FORM_RE.search(inner) and FORM_RE.fullmatch(inner) and not inner.startswith('"'):
            return spelling(inner)   # a run-on form: "{Gre*ga"ri*ous*ly}"
        return inner
    # Innermost first: "{{Clupea}}" occurs.
    while True:
        new = BRACE_RE.sub(one, text)
        if new == text:
            return new
        text = new


def are_names(words, names):
    """Whether words split into runs that are each one of the (folded) names."""
    if not words:
        return True
    return any(fold(" ".join(words[:k])) in names and are_names(words[k:], names)
               for k in range(1, len(words) + 1))


def drop_next_headwords(text, next_names):
    """Without the headwords of the next entries (folded in next_names) that
    dictd's conversion repeated at its end, after the last sentence: on lines
    of their own, or on the last line ("...to get a cadetship. Cadew")."""
    lines = text.split("\n")
    k = len(lines)
    while k > 1 and NAME_RE.fullmatch(lines[k - 1]) and fold(map_entities(lines[k - 1])) in next_names:
        k -= 1
    last = lines[k - 1]
    m = NAMES_AFTER_SENTENCE_RE.search(last)
    if m and are_names(map_entities(m.group(1)).split(), next_names):
        last = last[:m.start(1)]
    if last.rstrip().endswith(SENTENCE_ENDS):
        return "\n".join(lines[:k - 1] + [last])
    return text


def clean_entry(text, next_names=frozenset()):
    """One entry as plain text; next_names: the folded headwords of the entries
    that follow it, which dictd's conversion sometimes repeated at its end."""
    text = EPIGRAPH_RE.sub("", text.rstrip())
    text = TRAILING_TAG_RE.sub("", text).rstrip()
    text = drop_next_headwords(text, next_names)
    text = TAG_THEN_HEADWORD_RE.sub("\n\n", text)
    text = TAG_RE.sub("", text)
    text = replace_headwords(text)
    text = replace_parens(text)
    text = replace_braces(text)
    text = SENSE_REF_RE.sub("", text)
    text = ZODIAC_RE.sub(lambda m: ZODIAC[m.group(1)], text)
    text = map_entities(text).replace("{", "").replace("}", "")   # braces left unclosed in the source
    lines = []
    for block in BLOCK_SEP_RE.split(text):
        for part in SENSE_START_RE.split(block):   # "1." and "(a)" start a line
            part = SPACE_RE.sub(" ", part).strip()
            if part:
                lines.append(part)
    text = "\n".join(lines)
    return unicodedata.normalize("NFC", text)


# ----------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description="GCIDE (dict-gcide) as plain UTF-8 text, one entry per paragraph.")
    ap.add_argument("-o", "--output", required=True, help="output file (written atomically)")
    ap.add_argument("--dict", default=os.path.join(DICT_DIR, "gcide.dict.dz"), help="dictzip data file")
    ap.add_argument("--index", default=os.path.join(DICT_DIR, "gcide.index"), help="dictd index file")
    ap.add_argument("--limit", type=int, default=0, help="clean only the first N entries (0: all)")
    args = ap.parse_args()

    try:
        ranges = read_index(args.index)
        with gzip.open(args.dict, "rb") as f:
            data = f.read()
    except (OSError, ValueError, KeyError) as e:
        print("gcide_to_text: %s" % e, file=sys.stderr)
        return 1
    folded = [frozenset(fold(w) for w in words) for _, _, words in ranges]
    if args.limit > 0:
        ranges = ranges[:args.limit]
    entries = []
    for i, (off, length, _) in enumerate(ranges):
        if off + length > len(data):
            print("gcide_to_text: %s: entry at %d+%d is beyond the data (%d bytes)"
                  % (args.dict, off, length, len(data)), file=sys.stderr)
            return 1
        e = clean_entry(decode(data[off:off + length]), frozenset().union(*folded[i + 1:i + 9]))
        if e:
            entries.append(e)
    out = ("\n\n".join(entries) + "\n").encode("utf-8")
    if b"\0" in out:
        print("gcide_to_text: the output would contain a NUL byte", file=sys.stderr)
        return 1
    tmp = "%s.tmp.%d" % (args.output, os.getpid())   # two processes at once each rename a whole file
    with open(tmp, "wb") as f:
        f.write(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, args.output)
    print("gcide_to_text: %d entries, %d bytes -> %s" % (len(entries), len(out), args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
