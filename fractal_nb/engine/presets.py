"""Presets: seed 003's fixed track sets, each track with the skill that gathers its evidence.

See docs/architecture/engine.md, "Tracks" (presets). A preset names one of the seed's
two sets, ``ArchitectureUnderstanding`` and ``FeatureInvestigation``; with one, the tracks
seed writes its four tracks, their focus and deliverable phrased for the question,
without asking the model to pose tracks. Each track's metadata names its ``skill``
(:class:`~fractal_nb.vocabulary.Skill`), which the engine runs over the graph's sources
(engine/skills.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..checks import shown
from ..errors import InvalidInputError
from ..vocabulary import Preset, Skill, Strategy


class PresetTrack(NamedTuple):
    """One track of a preset: its name, the seed's focus kind, its skill, and what it looks for."""

    name: str
    kind: str  # the seed's Scope, e.g. ServiceInterfaces
    skill: Skill
    looks_for: str  # the focus, before the question
    deliverable: str


TRACK_SETS: dict[Preset, tuple[str, tuple[PresetTrack, ...]]] = {
    Preset.ARCHITECTURE: (
        "ArchitectureUnderstanding",
        (
            PresetTrack(
                "services",
                "ServiceInterfaces",
                Skill.PATTERN_SEARCH,
                "the service interfaces (public classes, protocols, functions)",
                "the interfaces involved, each cited by file and line",
            ),
            PresetTrack(
                "layers",
                "LayerComposition",
                Skill.DEPENDENCY_TRACE,
                "how the layers compose (definitions, imports, usage)",
                "who defines and who imports what, cited by file and line",
            ),
            PresetTrack(
                "errors",
                "ErrorHandling",
                Skill.IMPLEMENTATION_SCAN,
                "the error handling (raises, catches, refusals)",
                "the error paths, cited by file and line",
            ),
            PresetTrack(
                "config",
                "Configuration",
                Skill.BOUNDARY_EXPLORE,
                "the configuration at the package boundaries (entry points, settings, limits)",
                "the settings and entry points that shape it, cited by file and line",
            ),
        ),
    ),
    Preset.FEATURE: (
        "FeatureInvestigation",
        (
            PresetTrack(
                "models",
                "DataModels",
                Skill.IMPLEMENTATION_SCAN,
                "the data models (classes, records, enums)",
                "the data models involved, cited by file and line",
            ),
            PresetTrack(
                "ui-state",
                "UIComponents",
                Skill.PATTERN_SEARCH,
                "the user interface components and the state they hold",
                "the components and their state, cited by file and line",
            ),
            PresetTrack(
                "api",
                "APIEndpoints",
                Skill.DEPENDENCY_TRACE,
                "the API endpoints and what they call",
                "the endpoints and their callees, cited by file and line",
            ),
            PresetTrack(
                "errors",
                "ErrorCases",
                Skill.IMPLEMENTATION_SCAN,
                "the error cases (what fails, how it is reported)",
                "the error cases, cited by file and line",
            ),
        ),
    ),
}

RECIPES: dict[Skill, str] = {
    Skill.PATTERN_SEARCH: "glob the files the terms name, grep the terminology, read the context",
    Skill.DEPENDENCY_TRACE: "find the definitions and exports, grep their imports, read the usage",
    Skill.IMPLEMENTATION_SCAN: "find the types, locate implementations, trace raise/except/return, read",
    Skill.BOUNDARY_EXPLORE: "find the package entry points (__init__ files), grep their exports, read",
}
"""What each skill does (engine/skills.py runs it), as a track's approach says it."""


def check_preset(preset: object, strategy: object) -> Preset | None:
    """The preset, refused unless known and with the tracks strategy (None: the strategy's default).

    >>> check_preset("architecture", None), check_preset(None, "fractal")
    (<Preset.ARCHITECTURE: 'architecture'>, None)
    """
    if preset is None:
        return None
    if not isinstance(preset, str) or preset not in set(Preset):
        raise InvalidInputError(
            f"preset must be one of {', '.join(repr(p.value) for p in Preset)}, not {shown(preset)}"
        )
    if strategy not in (None, Strategy.TRACKS):
        raise InvalidInputError(
            f"preset={preset!r} poses the tracks strategy's tracks; strategy {strategy!r} takes no preset "
            "(pass strategy='tracks', or leave it out)"
        )
    return Preset(preset)


def preset_tracks(preset: Preset, question: str) -> list[dict[str, Any]]:
    """The preset's tracks for ``question``: ``{name, focus, approach, deliverable, skill, kind}`` each.

    >>> [t["name"] for t in preset_tracks(Preset.FEATURE, "How are users saved?")]
    ['models', 'ui-state', 'api', 'errors']
    >>> preset_tracks(Preset.ARCHITECTURE, "How does a claim stay atomic?")[0]["skill"]
    'PatternSearch'
    """
    return [
        {
            "name": t.name,
            "focus": f"{t.looks_for} behind: {question}",
            "approach": f"{t.skill.value}: {RECIPES[t.skill]}",
            "deliverable": t.deliverable,
            "skill": t.skill.value,
            "kind": t.kind,
        }
        for t in TRACK_SETS[preset][1]
    ]


def preset_plan(preset: Preset, tracks: list[dict[str, Any]]) -> str:
    """The root answer's text for a preset's tracks."""
    return (
        f"The preset {preset.value!r} (seed 003's {TRACK_SETS[preset][0]}) poses {len(tracks)} tracks: "
        + ", ".join(f"{t['name']} ({t['kind']}, {t['skill']})" for t in tracks)
        + "."
    )
