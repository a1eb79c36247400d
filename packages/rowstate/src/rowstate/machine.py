"""A state machine as frozen, validated data.

The machine is read by everything else: the SQL compiler, the dry run, the mock, the Mermaid
diagram. It never touches a database. Building one with an unknown state, a duplicate edge
name or a state that cannot be reached raises :class:`DefinitionError` at import time, so a
typo cannot reach production.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import DefinitionError, InvalidTransitionError


@dataclass(frozen=True, slots=True)
class Edge:
    """A named move ``src -> dst``.

    ``lease`` names the kind of side effect the edge performs; such an edge runs as
    claim -> act -> finalize under a lease of that kind (see :mod:`rowstate.lifecycle`).
    ``label`` is only for the diagram.
    """

    name: str
    src: str
    dst: str
    lease: str | None = None
    label: str | None = None

    @property
    def side_effecting(self) -> bool:
        return self.lease is not None


@dataclass(frozen=True)
class Machine:
    """States, edges, and which states are active (work in flight) or final (no way out).

    ``aliases`` maps old names of renamed states to their states, for the release between a
    rename and its migration (docs/engine.md, "Renaming a state with live rows"): a name
    given to :meth:`check_state` or :meth:`resolve` is read as the state it names, and the
    binding reads rows still holding it so too. An alias that is a state, or names none,
    is a :class:`DefinitionError`."""

    name: str
    states: tuple[str, ...]
    edges: tuple[Edge, ...]
    initial: str
    active: frozenset[str] = frozenset()
    notes: Mapping[str, str] = field(default_factory=dict)
    # states a row may be created in (``create(state=...)``): the initial one and these
    starts: frozenset[str] = frozenset()
    # old name -> state, kept for one release after a rename (docs/engine.md, "Renaming a
    # state with live rows"): code and rows naming the old state read as the new one
    aliases: Mapping[str, str] = field(default_factory=dict)
    _by_name: dict[str, Edge] = field(init=False, repr=False, compare=False)
    _by_pair: dict[tuple[str, str], tuple[Edge, ...]] = field(
        init=False, repr=False, compare=False
    )
    _sources: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        name: str,
        *,
        states: Iterable[str],
        edges: Iterable[Edge | tuple[str, str, str]],
        initial: str,
        active: Iterable[str] = (),
        notes: Mapping[str, str] | None = None,
        starts: Iterable[str] = (),
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "states", tuple(states))
        built = tuple(e if isinstance(e, Edge) else Edge(*e) for e in edges)
        object.__setattr__(self, "edges", built)
        object.__setattr__(self, "initial", initial)
        object.__setattr__(self, "active", frozenset(active))
        object.__setattr__(self, "notes", dict(notes or {}))
        object.__setattr__(self, "starts", frozenset((initial, *starts)))
        object.__setattr__(self, "aliases", dict(aliases or {}))
        self._validate()
        by_pair: dict[tuple[str, str], list[Edge]] = {}
        sources: dict[str, list[str]] = {}
        for e in built:
            by_pair.setdefault((e.src, e.dst), []).append(e)
            if e.src not in sources.setdefault(e.dst, []):
                sources[e.dst].append(e.src)
        object.__setattr__(self, "_by_name", {e.name: e for e in built})
        object.__setattr__(self, "_by_pair", {k: tuple(v) for k, v in by_pair.items()})
        object.__setattr__(self, "_sources", {k: tuple(v) for k, v in sources.items()})

    def _validate(self) -> None:
        if not self.name:
            raise DefinitionError("a machine needs a name")
        seen: set[str] = set()
        for s in self.states:
            if not isinstance(s, str) or not s:
                raise DefinitionError(f"{self.name}: state names are non-empty strings: {s!r}")
            if s in seen:
                raise DefinitionError(f"{self.name}: state {s!r} declared twice")
            seen.add(s)
        if self.initial not in seen:
            raise DefinitionError(f"{self.name}: initial state {self.initial!r} is not a state")
        for s in self.active:
            if s not in seen:
                raise DefinitionError(f"{self.name}: active state {s!r} is not a state")
        for s in self.starts:
            if s not in seen:
                raise DefinitionError(f"{self.name}: start state {s!r} is not a state")
        for old, new in self.aliases.items():
            if not isinstance(old, str) or not old or old in seen:
                raise DefinitionError(f"{self.name}: alias {old!r} is a state (or no name); "
                                      "an alias names a state the machine no longer has")
            if new not in seen:
                raise DefinitionError(f"{self.name}: alias {old!r} -> {new!r}: "
                                      f"{new!r} is not a state")
        names: set[str] = set()
        for e in self.edges:
            if e.name in names:
                raise DefinitionError(f"{self.name}: duplicate edge name {e.name!r}")
            names.add(e.name)
            if e.lease is not None and (not isinstance(e.lease, str) or not e.lease):
                raise DefinitionError(f"{self.name}: edge {e.name!r}: lease names the kind of "
                                      f"side effect (a string such as 'email'), got {e.lease!r}")
            for end in (e.src, e.dst):
                if end not in seen:
                    raise DefinitionError(
                        f"{self.name}: edge {e.name!r} uses unknown state {end!r}"
                    )
        reached = {self.initial}
        frontier = [self.initial]
        while frontier:
            here = frontier.pop()
            for e in self.edges:
                if e.src == here and e.dst not in reached:
                    reached.add(e.dst)
                    frontier.append(e.dst)
        unreachable = [s for s in self.states if s not in reached]
        if unreachable:
            raise DefinitionError(
                f"{self.name}: unreachable from {self.initial!r}: {', '.join(unreachable)}"
            )

    # -- reading the table -------------------------------------------------------------

    @property
    def final(self) -> frozenset[str]:
        """States with no edge out."""
        return frozenset(s for s in self.states if not any(e.src == s for e in self.edges))

    def edge(self, name: str) -> Edge:
        try:
            return self._by_name[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name is not an edge either
            raise InvalidTransitionError(f"{self.name}: no edge named {name!r}") from None

    def edges_between(self, src: str, dst: str) -> tuple[Edge, ...]:
        return self._by_pair.get((src, dst), ())

    def sources(self, dst: str) -> tuple[str, ...]:
        """States with an edge into ``dst``, in declaration order."""
        return self._sources.get(dst, ())

    def is_valid(self, src: str, dst: str) -> bool:
        return (src, dst) in self._by_pair

    def check_state(self, state: object) -> str:
        """``state`` by its current name (an alias is read as the state it names); an
        unknown state raises."""
        if isinstance(state, str):
            if state in self.states:
                return state
            if state in self.aliases:
                return self.aliases[state]
        raise InvalidTransitionError(f"{self.name}: unknown state {state!r}", to_state=state)

    def resolve(self, to: str, from_: Iterable[str] | str | None) -> tuple[str, ...]:
        """The from-states a move to ``to`` may leave, checked against the edge table.

        ``from_=None`` means every state with an edge into ``to``. A from-state with no edge
        into ``to`` is a programming error and raises before any I/O.
        """
        to = self.check_state(to)
        if from_ is None:
            froms = self.sources(to)
            if not froms:
                raise InvalidTransitionError(
                    f"{self.name}: no edge leads into {to!r}", to_state=to
                )
            return froms
        try:
            given = (from_,) if isinstance(from_, str) else tuple(dict.fromkeys(from_))
        except TypeError:  # not iterable, or holding unhashable things: not states
            raise InvalidTransitionError(
                f"{self.name}: from_ must be a state or states, got {from_!r}", to_state=to
            ) from None
        if not given:
            raise InvalidTransitionError(f"{self.name}: empty from-set for {to!r}", to_state=to)
        if self.aliases:
            given = tuple(dict.fromkeys(self.check_state(s) for s in given))
        for src in given:
            self.check_state(src)
            if not self.is_valid(src, to):
                raise InvalidTransitionError(
                    f"{self.name}: no edge {src} -> {to}", from_state=src, to_state=to
                )
        return given

    # -- drawing -----------------------------------------------------------------------

    def mermaid(self) -> str:
        """A ``stateDiagram-v2`` of the machine, as in the pub scheduler's design page."""
        lines = ["stateDiagram-v2", f"    [*] --> {self.initial}"]
        for e in self.edges:
            text = e.label or e.name
            if e.lease:
                text += f"<br/>(lease: {e.lease})"
            lines.append(f"    {e.src} --> {e.dst}: {text}")
        for s in sorted(self.final, key=self.states.index):
            lines.append(f"    {s} --> [*]")
        for s, note in self.notes.items():
            lines.append(f"    note right of {s}")
            lines.extend(f"        {line}" for line in note.splitlines())
            lines.append("    end note")
        return "\n".join(lines) + "\n"
