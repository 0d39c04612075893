"""What a report claims, as opposed to the words it uses (issue 38).

An expert's description of one defect mentions its neighbours ("two independently sequenced libraries cannot give
identical counts", "ddG = dG_wt - dG_mut holds in every row"), reports the checks that found nothing ("no empty
droplets") and the features of the data that are real but harmless (a detector gain that follows the room
temperature). Reading every catalogued pattern against the whole text charges those words as claims. So:

- an L1 alarm (a warning or blocking issue) claims at most ONE catalogued defect: the one its `category` names
  (the earliest named there), else the one the lead sentence of its `description` names; the rest is context;
- an L2 `issues_found` entry claims a trap unless it says it does not: a negated, below-threshold or harmless
  observation ("no batch effect", "a shift below the cutoff, not called", "does not affect the result") is no
  claim, nor is a structured entry with `"changes_result": false`; a claiming entry claims at most ONE trap, read
  as an L1 alarm is (`claimed_trap`: its category, its heading, else its lead);
- a claim of a family's declared nuisance feature (`FamilyManifest.nuisance`: present, harmless, measurable) is a
  true observation, never an invention.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

# a code right after one of these is a null check's report ("no gain drift observed"), not a claim of the defect
NEGATIONS = ("no", "not", "without", "no evidence of", "no sign of", "none of", "ruled out")

# an observation that says it is not a problem of this analysis: negated at its head, below a threshold, harmless,
# or without effect on the result (the cues are about the claim, not about any one defect)
NOT_A_CLAIM = re.compile(
    r"(?ix)"
    r"^\W*(?:none|nothing|absence\ of|ruled\ out|checked\ for|no\ evidence|no\ sign|no\ indication)\b"
    r"|^\W*(?:no|not)\b(?!.{0,60}\b(?:was|were|is|are|has\ been|have\ been)\s+(?:applied|used|done|performed|"
    r"corrected|accounted|included|modell?ed|adjusted|removed|filtered|considered|taken))"
    r"|\b(?:does|did|do|would|will|should|can|could|need)\s+not\s+(?:\w+\s+)?(?:affect|change|alter|bias|matter|impact|"
    r"influence|apply|invalidate|distort|inflate|explain)"
    r"|\b(?:doesn't|didn't|don't|won't|cannot|can't)\s+(?:\w+\s+)?(?:affect|change|alter|bias|matter|impact|influence|"
    r"apply|invalidate|distort|inflate|explain)"
    r"|^\W*checked\b|\b(?:no|none)\b[^.;]{0,80}\b(?:was|were|is|are)\s+(?:found|detected|observed|seen|present|needed)"
    r"|\b(?:was|were|is|are)\s+not\s+(?:found|detected|observed|seen|present|needed|affected|changed)"
    r"|\b(?:agrees?|agreeing|consistent)\s+with\s+(?:the\s+)?(?:stated|declared|expected|reported|recorded|annotated)"
    r"|\bbut\s+(?:these|they|this|it|none)\s+(?:are|is|was|were|do|does|did)\s+not\b"
    r"|\b(?:no|without|negligible|minimal)\s+(?:material\s+|measurable\s+|practical\s+|meaningful\s+|detectable\s+|"
    r"significant\s+|discernible\s+|noticeable\s+|appreciable\s+|visible\s+)?"
    r"(?:effect|impact|consequence|influence|bias|skew|distortion)\b"
    r"|\b(?:is|are|was|were)\s+not\s+(?:an?\s+)?(?:[\w-]+\s+){0,4}?(?:artefact|artifact|defect|error)s?\b"
    r"|^\W*(?:(?:all\s+|other\s+|remaining\s+|data\s+|library\s+|read\s+|file\s+)?"
    r"(?:QC|quality\s+control|sanity\s+checks?|checks?))\s+(?:that\s+)?"
    r"(?:pass(?:es|ed)?|(?:is|are|was|were)\s+(?:fine|clean|normal|ok))\b"
    r"|\bbelow\s+(?:the\s+|any\s+|our\s+|a\s+)?(?:threshold|cut-?off|significance|detection|noise)"
    r"|\bnot\s+(?:present|detected|found|observed|seen|an?\s+issue|a\s+problem|relevant|material)\b"
    r"|\b(?:negligible|harmless|immaterial|inconsequential|unaffected|benign)\b"
    r"|\b(?:does|did|do|causes?|caused|makes?)\s+no\s+(?:harm|difference)\b|\bno\s+harm\b"
    r"|\bruled\s+out\b|\bwithin\s+(?:noise|tolerance|expectations?|normal\s+range)\b"
    r"|\bnone\s+(?:found|detected|observed|present)\b"
    r"|\bnone\s+of\s+(?:these|them|this|which|it)\s+(?:\w+\s+)?(?:affects?|changes?|alters?|matters?|reach\w*|touch\w*)"
    r"|\bno\s+(?:\w+\s+){0,3}(?:is|are|was|were)\s+affected\b"
    r"|\b(?:found|showed|revealed|detected|turned\s+up)\s+(?:nothing|no\s+(?:problems?|issues?|defects?|signs?|evidence))\b")

# the same, read on an entry's lead only: a verdict of soundness at its head ("The energy calibration is sound.",
# "Hit calls are the same with or without the CN correction") says the entry reports a check that found nothing,
# while later words in a claim ("... is stable, but the drift biases ...") stay the claim's context
NOT_A_CLAIM_LEAD = re.compile(
    r"(?ix)^[^.;:]{0,100}?\b(?:is|are|was|were|looks?|seems?|appears?|stays?|remains?)\s+(?:\w+\s+)?"
    r"(?:sound|fine|correct|valid|stable|reliable|accurate|clean|ok|okay|as\s+expected|unaffected|unchanged|"
    r"(?:the\s+same|identical)\s+(?:with\s+or\s+without|either\s+way|whether))\b(?![^.;]{0,40}\bbut\b)"
    # two measurements said to agree ("treated and control agree in ...", "the two estimates match to 0.003 K")
    r"|^[^.;:]{0,100}?\b(?:agree|agrees|agreed|match|matched|coincide)\s+(?:closely\s+|well\s+|both\s+)?"
    r"(?:in|on|to|within|with\s+each\s+other)\b(?![^.;]{0,40}\bbut\b)")

_LEAD_END = re.compile(r"(?<=[a-z0-9)\]%])[.;!?](?=\s|$)|\n", re.IGNORECASE)
LEAD_MAX = 240  # characters of a description read as its lead when it has no sentence end


def lead(text: str) -> str:
    """The lead of a description: its first sentence (up to the first full stop, semicolon or line end)."""
    text = str(text or "").strip()
    m = _LEAD_END.search(text)
    return (text[: m.start()] if m else text)[:LEAD_MAX]


def code_pattern(code: str) -> str:
    """A defect named by its own catalogue code (`duplicate_barcodes`, `duplicate barcodes`), unless a negation
    (NEGATIONS) comes right before it."""
    guard = "".join(rf"(?<!\b{re.escape(n)} )" for n in NEGATIONS)
    return guard + r"\b" + r"[\s_-]?".join(re.escape(w) for w in code.split("_")) + r"\b"


# a topic named as the object of a check ("energy scale checked against the Cu standard", "the calibration was
# verified with ...") reports the check, not the defect, unless the same text says something changes the result
CHECKED_AFTER = re.compile(r"(?i)\w*(?:\s+[\w-]+){0,2}?\W{0,3}(?:(?:was|were|is|are|has\s+been|have\s+been)\s+)?"
                           r"(?:also\s+|independently\s+)?(?:re-?|cross-?)?(?:checked|verified|validated|confirmed)\b")


# an L2 observation that names a trap only to set it aside: contrasted away right before it ("the inflation is polygenic
# signal, not confounding", "rather than a batch effect") or left open right after it ("modest confounding cannot be
# ruled out"): the entry does not assert the trap (blind study 28, gwas ldscore clean, capped at 20), nor does one that
# calls it nil ("redistribution hides under the null global change": blind study 33, histone differential clean)
SET_ASIDE_BEFORE = re.compile(r"(?i)(?:(?:\b(?:not|no|nor|without|rather\s+than|instead\s+of)"
                              r"(?:\s+(?:due\s+to|caused\s+by|driven\s+by|from))?)\s+(?:an?\s+|the\s+|any\s+)?"
                              # a quantity said to be nil ("hides under the null global change", "a negligible shift")
                              r"|\b(?:null|nil|zero|negligible)\s+)$")
LEFT_OPEN_AFTER = re.compile(r"(?i)\W{0,3}(?:[\w-]+\s+){0,3}?(?:cannot|can't|could\s+not|can\s+not)\s+(?:yet\s+)?(?:be\s+)?"
                             r"(?:fully\s+|entirely\s+|completely\s+)?(?:ruled\s+out|excluded)\b")


def _set_aside(text: str, m: re.Match) -> bool:
    return bool(SET_ASIDE_BEFORE.search(text[max(0, m.start() - 40):m.start()])
                or LEFT_OPEN_AFTER.match(text, m.end()))


def _first_match(patterns: Iterable[str], text: str, checks_named: bool = True, asides: bool = False) -> int | None:
    """Where the earliest pattern matches; with `checks_named` false, a match that is the object of a check
    (CHECKED_AFTER) is passed over; with `asides`, so is one the text sets aside (`_set_aside`)."""
    best = None
    for p in patterns:
        for m in re.finditer(p, text, flags=re.IGNORECASE):
            if (checks_named or CHECKED_AFTER.match(text, m.end()) is None) and not (asides and _set_aside(text, m)):
                if best is None or m.start() < best:
                    best = m.start()
                break
    return best


def named_codes(catalog: dict[str, list[str]], text: str, checks_named: bool | None = None,
                asides: bool = False) -> list[str]:
    """Every catalogued code the text names, in the order they are first named (ties in catalogue order). A code
    named only as what was checked ("energy scale checked against the Cu standard") is not named, unless the text
    says something changes the result (ASSERTS_EFFECT, or `checks_named`: a structured entry flagged so). With
    `asides` (an L2 entry; an L1 warning is a claim whatever its words), nor is one the text sets aside."""
    hits = []
    checks_named = checks_named or bool(ASSERTS_EFFECT.search(text))
    for i, (code, pats) in enumerate(catalog.items()):
        pos = _first_match([*pats, code_pattern(code)], text, checks_named, asides)
        if pos is not None:
            hits.append((pos, i, code))
    return [c for _, _, c in sorted(hits)]


def claim_catalog(catalog: dict[str, list[str]], prompt: str) -> dict[str, list[str]]:
    """A family's catalogue as a claim is read: a pattern that matches the family's own prompt names a topic the task
    itself sets ("ddG", "batch", "copy_number", "summary", "the Mn-54 reference spectrum"), which every report
    discusses, so it alone does not make an issue a claim of that defect, in L1 as in L2 (the code's own words still
    do: `code_pattern`; a world's rubric diagnosis patterns still recognise its own defect)."""
    return {code: [p for p in pats if not re.search(p, prompt, flags=re.IGNORECASE)] for code, pats in catalog.items()}


def category_text(category: Any) -> str:
    """A category as words: `chromosome_naming_mismatch` reads as `chromosome naming mismatch`."""
    return re.sub(r"_+", " ", str(category or ""))


def _word(w: str) -> str:
    return re.sub("[sz]", "[sz]", re.escape(w))  # normalised / normalized


def category_codes(catalog: dict[str, list[str]], category: Any) -> list[str]:
    """The codes a category names: by the catalogue (`named_codes`), else a code every word of which the category
    holds in any order ("counts_normalised_not_raw" names normalised_counts; "chromosome naming mismatch" names a
    code `chromosome_mismatch`): a category is a label of a few words, and experts order them their own way."""
    text = category_text(category)
    codes = named_codes(catalog, text)
    if codes or not text:
        return codes
    return [code for code in catalog
            if len(code.split("_")) > 1 and all(re.search(rf"\b{_word(w)}", text, flags=re.IGNORECASE)
                                                for w in code.split("_"))]


# words of a defect's code that say what state a thing is in, not which thing: "low", "missing", "swapped" ... What is
# left names the defect's subject ("replicate", "correlation" of low_replicate_correlation; "channel" of channel_shift)
STATE_WORDS = frozenset("""
    low high many few missing duplicate duplicated duplicates truncated swap swapped mismatch mismatched wrong unsorted
    stale flip flipped shift shifted reset exceeds naming label labels units unit copy error errors normalised normalized
    unnormalized uncollapsed unmapped complemented unreferenced misaligned misalignment zero bottlenecked collisions
    real rows records file table sample samples points spectra
    """.split())


def subject_stems(code: str) -> list[str]:
    """The stems of the words that name a defect's subject (its code's words less STATE_WORDS, four letters or more),
    an ending -ion, -s or -e cut so its inflections match (`SUBJECT_ENDINGS`: "replicate" -> "replicat": replicates,
    replication)."""
    words = [w for w in code.lower().split("_") if len(w) >= 4 and w not in STATE_WORDS]
    return [re.sub(r"(?:ion|s|e)$", "", re.sub(r"s$", "", w)) for w in words]


SUBJECT_ENDINGS = r"(?:e|es|s|ed|d|ing|ion|ions)?"


def about_subject(code: str, issue: dict[str, Any], subjects: Iterable[str] = ()) -> bool:
    """Whether an alarm's category or lead is about a defect's subject (`subject_stems`): "replicate_reproducibility"
    and "the two RNA replicates agree less well than expected" are about low_replicate_correlation's replicates,
    whichever words say what is wrong with them. `subjects`: the family's own words for it where the code's are all
    state words or too short (`FamilyManifest.defect_subjects`: "AF1", "allele frequenc" for complemented_eaf), each
    matched at a word start."""
    text = f"{category_text(issue.get('category'))} {lead(str(issue.get('description') or ''))}"
    return (any(re.search(rf"\b{re.escape(s)}{SUBJECT_ENDINGS}\b", text, flags=re.IGNORECASE) for s in subject_stems(code))
            or any(re.search(rf"\b{re.escape(str(w).strip())}", text, flags=re.IGNORECASE) for w in subjects))


def claimed_defect(catalog: dict[str, list[str]], issue: dict[str, Any]) -> str | None:
    """The one catalogued defect an L1 issue claims: the earliest its category names (`category_codes`), else the
    earliest the lead of its description names; None when neither names one (an uncatalogued problem). A warning is a
    claim of a problem whatever its words ("No spectrum exists for days 12-15" claims missing spectra), so no
    negation cue applies."""
    codes = category_codes(catalog, issue.get("category"))
    if not codes:
        codes = named_codes(catalog, lead(str(issue.get("description") or "")))
    return codes[0] if codes else None


_HEADING = re.compile(r"^\s*([^:.;\n]{1,120}):\s")


def claimed_traps(catalog: dict[str, list[str]], item: Any) -> list[str]:
    """Every catalogued trap the part of an entry that claims (`claimed_trap`: its category, else its heading, else
    its lead) names, first named first. "Pile-up losses are missing from the live time" names the pile-up trap and
    the dead-time one: where one of them is the world's own, the entry is that trap's claim, not an invented other."""
    flagged = isinstance(item, dict) and item.get("changes_result") is True
    codes = category_codes(catalog, item.get("category")) if isinstance(item, dict) else []
    text = _category_and_text(item)[1]
    head = _HEADING.match(text)
    if not codes and head:
        codes = named_codes(catalog, head.group(1), flagged, asides=True)
    if not codes:
        codes = named_codes(catalog, lead(text), flagged, asides=True)
    return codes


def claiming_text(item: Any) -> str:
    """The part of an `issues_found` entry that makes its claim (`claimed_traps`): its category, and its text's heading
    ("Jackpot/bottleneck in replicate R3: ...") or else its lead."""
    category, text = _category_and_text(item)
    head = _HEADING.match(text)
    return " ".join(x for x in (category, head.group(1) if head else lead(text)) if x)


def _category_and_text(item: Any) -> tuple[str, str]:
    """An `issues_found` entry's category (structured entries only) and its text: `issue`, `what`, `description`."""
    if isinstance(item, dict):
        return (str(item.get("category") or ""),
                " ".join(str(item.get(k) or "") for k in ("issue", "what", "description")))
    return "", str(item or "")


def claim_is_nuisance(nuisance: Iterable[Any], world_id: str, item: Any, effect: bool = False,
                      golden: dict | None = None, text_sizes: bool = False) -> bool:
    """Whether the part of an entry that claims (`claiming_text`) describes one of the world's declared nuisance
    features (one the text may say changes the result only where the feature can, at a size it has in the world's
    `golden`): the entry reports that feature, whichever catalogued trap its other words also name ("Jackpot/bottleneck
    in final replicate R3" reports the declared jackpots, not the plasmid-reference trap that "bottleneck" names)."""
    return any(not effect or getattr(n, "can_move_result", False)
               for n in _described(nuisance, world_id, claiming_text(item), entry_value(item), golden, text_sizes))


def entry_value(item: Any) -> float | None:
    """A structured entry's measured size (`value`), when it is a number."""
    v = item.get("value") if isinstance(item, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def claimed_trap(catalog: dict[str, list[str]], item: Any) -> str | None:
    """The one catalogued trap an L2 `issues_found` entry claims, as `claimed_defect` reads an L1 alarm: a structured
    entry's `category`, else the heading of its text ("Dead time: ..."), else the lead of its text. The rest of
    the entry is context: an expert's entry on one problem names the files, references and checks around it."""
    codes = claimed_traps(catalog, item)
    return codes[0] if codes else None


def item_text(item: Any) -> str:
    """An `issues_found` entry as text: a string, or a structured entry's `issue` (or `what`) with its words."""
    if isinstance(item, dict):
        text = " ".join(str(item.get(k) or "") for k in ("issue", "what", "category", "description"))
        value = item.get("value")
        return text if value is None or isinstance(value, bool) else f"{text} ({value})"
    return str(item or "")


def is_claim(item: Any) -> bool:
    """Whether an `issues_found` entry claims a problem of this analysis: a structured entry unless its
    `changes_result` is false; a string unless it says it is none (NOT_A_CLAIM)."""
    if isinstance(item, dict):
        flag = item.get("changes_result")
        if flag is False:
            return False
        if flag is True:
            return True
    text = item_text(item)
    return not NOT_A_CLAIM.search(text) and lead_claims(text)


def lead_claims(text: str) -> bool:
    """Whether the lead of an entry claims anything: not negated at its head nor a verdict of soundness. An entry whose
    lead does not claim is no recognition either, whatever trap its later words name."""
    head = lead(text)
    return not NOT_A_CLAIM.search(head) and not NOT_A_CLAIM_LEAD.search(head)


# an entry that says the problem moves this analysis' answer (the claim an alarmist makes of a trap that is not there)
ASSERTS_EFFECT = re.compile(
    r"(?i)\b(?:bias(?:es|ed)?|inflat\w*|deflat\w*|invalidat\w*|distort\w*|spurious|"
    r"(?:changes?|affects?|alters?|shifts?|drives?)\s+(?:the|our|this|every)\s+(?:\w+\s+)?"
    r"(?:result|answer|estimate|conclusion|call|ranking|value)s?)\b")


# a negation earlier in the same clause ("no global shift or composition bias") takes the effect back
_NEGATED_BEFORE = re.compile(r"(?i)(?:\b(?:no|not|without|nor|neither|never)\b|n't\b)[^.;,:]{0,60}$")


def asserts_effect(item: Any) -> bool:
    """Whether a claimed entry says it changes the result: a structured `changes_result: true`, or words to that
    effect (ASSERTS_EFFECT) that no negation in the same clause takes back."""
    if isinstance(item, dict) and item.get("changes_result") is True:
        return True
    text = item_text(item)
    return any(not _NEGATED_BEFORE.search(text[max(0, m.start() - 80):m.start()])
               for m in ASSERTS_EFFECT.finditer(text))


def measured(text: str) -> bool:
    """Whether an observation reports a measurement (a number): a nuisance feature is present, harmless and
    measurable, so its true report measures it; a bare claim of the trap it resembles does not."""
    return bool(_NUMBER.search(str(text or "")))


# a number standing on its own ("0.5%", "274 spectra", "r = -0.99"), not a digit inside a name (Mn-54, chr19, H3K27me3)
_NUMBER = re.compile(r"(?<![A-Za-z0-9.-])-?\d+(?:[.,]\d+)?(?![.,]?\d)(?![A-Za-z0-9]*-\d)")


def nuisance_codes(nuisance: Iterable[Any], world_id: str, text: str, effect: bool = False,
                   value: float | None = None, golden: dict | None = None, text_sizes: bool = False) -> set[str]:
    """The catalogued codes that the nuisance features this text describes resemble (those claims are true of the
    world): a feature counts where it applies (`Nuisance.applies_to`) and one of its patterns matches. With `effect`
    (the text says it changes the result) only the features that can move a result (`can_move_result`) count. A
    reported `value` must fit the feature's measured size in the world's `golden` (`Nuisance.fits_size`), and the items it names
    the items that show the feature there (`Nuisance.fits_items`)."""
    return {n.resembles for n in _described(nuisance, world_id, text, value, golden, text_sizes)
            if n.resembles and (not effect or getattr(n, "can_move_result", False))}


def measures_nuisance(nuisance: Iterable[Any], world_id: str, text: str, golden: dict | None = None) -> bool:
    """Whether a text measures a nuisance feature: it states a number (`measured`), or it names the items that show
    a feature that declares them (`Nuisance.fits_items`: "LST1, AIF1, TYROBP, FCER1G and SPI1 are up against the
    pooled rest but lower than in CD14+ monocytes" measures the shared programme by its genes, blind study 31; a bare
    claim names none, or names genes that do not show it)."""
    if measured(text):
        return True
    return golden is not None and any(
        getattr(n, "items", None) and n.applies_to(world_id) and n.fits_items(text, golden)
        and any(re.search(p, text, flags=re.IGNORECASE) for p in n.patterns) for n in nuisance)


def excused_by_nuisance(nuisance: Iterable[Any], world_id: str, item: Any, golden: dict | None = None,
                        text_sizes: bool = False) -> bool:
    """Whether a claimed entry is a true report of one of the world's nuisance features: it describes one and
    measures it (`measures_nuisance`) at a size the feature has in the world's `golden` (`Nuisance.fits_size`, read on a
    structured entry's `value`), and says it changes the result only where the feature can (`can_move_result`)."""
    text = item_text(item)
    effect = asserts_effect(item)
    return measures_nuisance(nuisance, world_id, text, golden) and any(not effect or getattr(n, "can_move_result", False)
                                  for n in _described(nuisance, world_id, text, entry_value(item), golden, text_sizes))


def describes_nuisance(nuisance: Iterable[Any], world_id: str, text: str, value: float | None = None,
                       golden: dict | None = None) -> bool:
    """Whether the text describes one of the world's declared nuisance features (any of its patterns), at a size
    (`value`) the feature can have there."""
    return bool(_described(nuisance, world_id, text, value, golden))


def _described(nuisance: Iterable[Any], world_id: str, text: str, value: float | None = None,
               golden: dict | None = None, text_sizes: bool = False) -> list[Any]:
    """The nuisance features a text describes at a size they have in the world. With `text_sizes` (an L2 entry,
    whose `value` may measure the feature's effect on the result, not the feature: "the live-time correction moves
    the half-life by 5.8 d" beside "dead time 0.07 %", blind study 28) a number the text states may give the size,
    where the text also states the value (it then says what the value measures); a value the text does not explain
    is the entry's size, and one the feature does not have claims the trap."""
    # the entry's own words: item_text appends the value in parentheses, which explains nothing
    stated = _stated_numbers(re.sub(r"\s\(-?[\d.eE+-]+\)\s*$", "", text)) if text_sizes and value is not None else []
    explained = any(abs(x - value) <= 1e-9 + 1e-6 * abs(value) for x in stated)
    return [n for n in nuisance
            if n.applies_to(world_id) and any(re.search(p, text, flags=re.IGNORECASE) for p in n.patterns)
            and (not hasattr(n, "fits_size") or n.fits_size(value, golden)
                 or (explained and any(n.fits_size(x, golden) for x in stated)))
            and (not hasattr(n, "fits_items") or n.fits_items(text, golden))]


# a range of decimals ("0.31-0.33%", "1.5–3"): both ends are stated (dates and IDs have no decimal point); `_NUMBER`
# skips a number joined to another by a hyphen, so an ID like D001-D104 or a date is no size
_DECIMAL_RANGE = re.compile(r"(?<![A-Za-z0-9.])(\d+\.\d+)\s*[-\u2013]\s*(\d+\.\d+)(?![\d.])(\s*%)?")


def _stated_numbers(text: str) -> list[float]:
    """The numbers a text states (`_NUMBER`, and both ends of a range of decimals), a decimal comma read as a point;
    a percentage is also stated as its fraction ("0.33%" states 0.0033, the form a `value` gives it)."""
    text = str(text or "")
    out = []
    for m in _NUMBER.finditer(text):
        try:
            x = float(m.group(0).replace(",", "."))
        except ValueError:
            continue
        out += [x, x / 100] if text[m.end():m.end() + 2].lstrip().startswith("%") else [x]
    for m in _DECIMAL_RANGE.finditer(text):
        ends = [float(m.group(1)), float(m.group(2))]
        out += ends + ([x / 100 for x in ends] if m.group(3) else [])
    return out
