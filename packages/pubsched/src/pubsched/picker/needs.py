"""Which of a shift's needs the tenders on it meet: a maximum matching, one tender a need.

A tender with both ``keys`` and ``cellar`` meets one of the two, never both (one person
holds one reserved slot), so "is the need met" is a bipartite matching between the
tenders on a shift and its needs, not a per-need membership test. The picker, the week's
page and ``week show --json`` all ask this one function, so they cannot disagree about
what is missing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping


def matched(needs: Collection[str], skills_of: Mapping[str, Collection[str]]) -> int:
    """The size of a maximum matching of tenders (``skills_of``: id -> skills) to needs."""
    return len(needs) - len(unmet(needs, skills_of))


def unmet(needs: Collection[str], skills_of: Mapping[str, Collection[str]]) -> tuple[str, ...]:
    """The needs a maximum matching leaves unmet, sorted.

    How many is fixed by the tenders; *which* ones, when there is a choice (one tender with
    ``keys`` and ``cellar`` for a shift needing both), is decided by trying the needs in
    sorted order and the tenders in sorted order (Kuhn's augmenting paths), so the same
    shift always reports the same missing skill.
    """
    owner: dict[str, str] = {}  # need -> the tender meeting it
    ordered = sorted(skills_of)

    def place(tender_id: str, seen: set[str]) -> bool:
        for need in sorted(set(skills_of[tender_id]) & set(needs)):
            if need in seen:
                continue
            seen.add(need)
            holder = owner.get(need)
            if holder is None or place(holder, seen):
                owner[need] = tender_id
                return True
        return False

    for tender_id in ordered:
        place(tender_id, set())
    return tuple(sorted(n for n in set(needs) if n not in owner))


def overrides(needs: Collection[str], general: int,
              pinned_skills: Mapping[str, Collection[str]]) -> int:
    """How many pinned tenders must hold a reserved slot without its skill.

    The operator's pins always stand, so when more pins lack a matching skill than the
    shift has unreserved slots, the surplus takes reserved slots anyway (those needs are
    then missing). It is the fewest that places every pin: never more, so a reserved slot
    is not handed to someone without the skill while a pin could sit elsewhere.
    """
    return max(0, len(pinned_skills) - general - matched(needs, pinned_skills))
