"""Render a bibliographic record as a reference string in a common style.

Used by the benchmark (labelled records -> answers in several styles) and available to the
correction prompt ("the record we found is: ..."). Styles follow the published manuals in
their most common form: APA 7 (§9-10), IEEE Reference Guide, MLA 9, Chicago 17 (notes-
bibliography), Harvard (Cite Them Right), ACM Reference Format, Vancouver (ICMJE), GB/T 7714-2015.
"""

from __future__ import annotations

from verifiers.citations._records import parse_person, split_bibtex_authors

#: the reference styles :func:`render` writes
STYLES = ("apa", "ieee", "mla", "chicago", "harvard", "acm", "vancouver", "bibtex", "gbt7714")


def _people(authors: list[str]):
    out = []
    for a in authors:
        p = parse_person(a)
        if p is None:
            continue
        given = ""
        if "," in a:
            given = a.split(",", 1)[1].strip()
        else:
            toks = a.split()
            given = " ".join(toks[:-1])
            surname_raw = toks[-1] if toks else a
        surname_raw = a.split(",", 1)[0].strip() if "," in a else (a.split()[-1] if a.split() else a)
        # drop DBLP homonym numbers ("Rohit Agrawal 0002")
        if surname_raw.isdigit() and len(a.split()) >= 3:
            toks = a.split()[:-1]
            surname_raw, given = toks[-1], " ".join(toks[:-1])
        initials = [w[0].upper() for w in given.replace("-", " ").replace(".", " ").split() if w[:1].isalpha()]
        out.append((surname_raw, given, initials))
    return out


def _ini(initials: list[str], sep: str = " ") -> str:
    return sep.join(f"{i}." for i in initials)


def render(record: dict, style: str) -> str:
    """Reference string for ``record`` (keys: title, author (BibTeX "A and B") or authors (list),
    year, venue / journal / booktitle, volume, pages, doi) in ``style`` (one of :data:`STYLES`).

    Raises ``ValueError`` for an unknown style.
    """
    title = (record.get("title") or "").strip().rstrip(".")
    authors = record.get("authors") or split_bibtex_authors(record.get("author", ""))
    year = record.get("year") or ""
    venue = record.get("venue") or record.get("journal") or record.get("booktitle") or ""
    doi = record.get("doi") or ""
    vol, pages = record.get("volume") or "", record.get("pages") or ""
    ppl = _people(authors)
    et_al = bool(record.get("et_al"))
    tail_doi = f" https://doi.org/{doi}" if doi else ""
    if style == "apa":
        names = [f"{s}, {_ini(i)}".strip(", ") for s, _, i in ppl]
        au = ", ".join(names[:-1]) + (", & " if len(names) > 1 else "") + names[-1] if names else ""
        au = f"{names[0]}, et al." if et_al and names else au
        v = f" *{venue}*" + (f", {vol}" if vol else "") + (f", {pages}" if pages else "") + "." if venue else ""
        return f"{au} ({year}). {title}.{v}{tail_doi}".strip()
    if style == "ieee":
        names = [f"{_ini(i)} {s}".strip() for s, _, i in ppl]
        au = names[0] if len(names) == 1 else (", ".join(names[:-1]) + ", and " + names[-1] if names else "")
        if len(names) > 6 or (et_al and names):
            au = names[0] + " et al."
        v = f" in *Proc. {venue}*," if venue else ""
        return f"{au}, \u201c{title},\u201d{v} {year}." + (f" doi: {doi}." if doi else "")
    if style == "mla":
        if not ppl:
            au = ""
        elif len(ppl) == 1:
            au = f"{ppl[0][0]}, {ppl[0][1]}".strip(", ")
        elif len(ppl) == 2:
            au = f"{ppl[0][0]}, {ppl[0][1]}, and {ppl[1][1]} {ppl[1][0]}".replace("  ", " ")
        else:
            au = f"{ppl[0][0]}, {ppl[0][1]}, et al".strip()
        v = f" *{venue}*," if venue else ""
        return (f"{au}. \u201c{title}.\u201d{v} {year}" + (f", https://doi.org/{doi}." if doi else ".")).replace(" ,", ",")
    if style == "chicago":
        parts = []
        for k, (s, g, _i) in enumerate(ppl):
            parts.append(f"{s}, {g}".strip(", ") if k == 0 else f"{g} {s}".strip())
        au = parts[0] if len(parts) == 1 else (", ".join(parts[:-1]) + ", and " + parts[-1] if parts else "")
        v = f" *{venue}*" if venue else ""
        return f"{au}. {year}. \u201c{title}.\u201d{v}." + (f" https://doi.org/{doi}." if doi else "")
    if style == "harvard":
        names = [f"{s}, {_ini(i, '')}".strip(", ") for s, _, i in ppl]
        au = names[0] if len(names) == 1 else (", ".join(names[:-1]) + " and " + names[-1] if names else "")
        v = f" *{venue}*" if venue else ""
        return f"{au} ({year}) '{title}',{v}." + (f" doi:{doi}." if doi else "")
    if style == "acm":
        names = [f"{g} {s}".strip() for s, g, _ in ppl]
        au = names[0] if len(names) == 1 else (", ".join(names[:-1]) + ", and " + names[-1] if names else "")
        v = f" In *{venue}*." if venue else ""
        return f"{au}. {year}. {title}.{v}" + (f" https://doi.org/{doi}" if doi else "")
    if style == "vancouver":
        names = [f"{s} {''.join(i)}".strip() for s, _, i in ppl]
        au = ", ".join(names[:6]) + (", et al" if len(names) > 6 else "")
        return f"{au}. {title}. {venue}. {year}." + (f" doi:{doi}" if doi else "")
    if style == "bibtex":
        key = (ppl[0][0] if ppl else "anon").lower() + str(year)
        fields = [f"  title = {{{title}}}", f"  author = {{{' and '.join(authors)}}}", f"  year = {{{year}}}"]
        if venue:
            fields.append(f"  booktitle = {{{venue}}}")
        if doi:
            fields.append(f"  doi = {{{doi}}}")
        return "@inproceedings{" + key + ",\n" + ",\n".join(fields) + "\n}"
    if style == "gbt7714":
        names = [f"{s.upper()} {''.join(i)}".strip() for s, _, i in ppl]
        au = ", ".join(names[:3]) + (", et al" if len(names) > 3 else "")
        return f"{au}. {title}[J]. {venue}, {year}." + (f" DOI: {doi}." if doi else "")
    raise ValueError(f"unknown style {style!r}; expected one of {STYLES}")
