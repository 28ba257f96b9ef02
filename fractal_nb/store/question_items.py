"""A whole graph as the live view's question items, folded and written as JSON by the database.

The store keeps questions, answers and notes as nodes; a reader thinks in questions
(docs/architecture/faces.md, "The live view's protocol"). For a whole graph (a view that
opens, the exported page) the database folds each question's answers and notes into it,
maps links onto their questions and writes the JSON itself, so a page of 100,000
nodes costs no Python per row: one statement per dialect (DuckDB's lists and lambdas,
PostgreSQL's json_agg), giving the same items (tests/store/test_dialect_reads.py).
Deltas are folded in Python from ``get_changes`` (views/question_tree.py, a handful
of rows each); tests/views/test_question_items.py keeps the two folds equal on every
graph shape the tests grow.
"""

from __future__ import annotations

import json

from ..vocabulary import TRACK_KEY, NodeStatus
from .database import Database
from .dialect import Dialect, Per, json_text, pick
from .records import QuestionItems

TEXT_CHARS = 2000
"""An answer, synthesis or error as the hover box and details panel get it (longer ones are cut, '…')."""
FAILED = "failed"
"""The view's status of a question that failed (``error``, or saturated as ``error`` by a harvest)."""
PRUNED = "pruned"
"""The view's status of a question a person pruned (saturated as ``pruned``): dropped, not settled."""
VIEW_STATUSES = (*(s.value for s in NodeStatus if s != NodeStatus.ERROR), FAILED, PRUNED)
"""The statuses a question item shows: the store's, ``failed`` for both forms of a failure, ``pruned``."""
UNSUPPORTED = "unsupported"
"""An answer's support when the graph has sources and its citations failed or are missing."""
JOINED = "sub-findings joined without the model"
"""A weak reason: the synthesis was joined from its sub-findings (metadata ``synthesis_failed``)."""


def _clip(text: str) -> str:
    return (
        f"CASE WHEN length({text}) <= {TEXT_CHARS} THEN {text} ELSE left({text}, {TEXT_CHARS - 1}) || '…' END"
    )


_ERROR = "coalesce(json_extract_string(q.meta, '$.last_error'), q.status_reason, 'error')"
_ERROR_PG = "coalesce(q.meta ->> 'last_error', q.status_reason, 'error')"
# One row per question (answers and notes grouped under theirs), in creation order. A question
# under an answer hangs from that answer's question (``via`` the answer); the weak reasons are
# the weak mark's entries as "reason: node" (docs/architecture/engine.md, "Facts, assumptions, unknowns").
# PostgreSQL's fold gives the same items key for key: the metadata read once as jsonb, lists built
# by json_agg (in order, FILTER), a weak mark's entries by a subquery over its elements in order,
# the statuses' histogram by json_object_agg. JSON comes back as text, the sums as bigint.
QUESTIONS = Per(
    duckdb=f"""
WITH n AS (
    SELECT node_id, parent_id, node_type, text, depth, status, status_reason, owner, seq,
           CAST(metadata AS JSON) AS meta
    FROM nodes WHERE graph_id = ?),
folded AS (
    SELECT parent_id AS question,
        list(CASE WHEN json_extract_string(meta, '$.support') IS NULL
                  THEN json_object('id', node_id, 'text', {_clip("text")})
                  ELSE json_object('id', node_id, 'text', {_clip("text")},
                                   'support', json_extract_string(meta, '$.support')) END
             ORDER BY seq) FILTER (WHERE node_type = 'answer') AS answers,
        list(json_object('id', node_id, 'text', {_clip("text")}) ORDER BY seq)
            FILTER (WHERE node_type = 'note') AS notes,
        count(*) FILTER (WHERE json_extract_string(meta, '$.support') = '{UNSUPPORTED}') AS unsupported,
        count(*) FILTER (WHERE node_type = 'answer') AS answered
    FROM n WHERE node_type IN ('answer', 'note') GROUP BY parent_id),
q AS (
    SELECT n.*, p.node_type = 'answer' AS under_answer, p.parent_id AS above_answer,
        CASE WHEN n.status = 'error' OR (n.status = 'saturated' AND n.status_reason = 'error')
             THEN '{FAILED}'
             WHEN n.status = 'saturated' AND n.status_reason = '{PRUNED}' THEN '{PRUNED}'
             ELSE n.status END AS shown,
        coalesce(json_extract(n.meta, '$.synthesis_failed') = 'true'::JSON, false) AS joined,
        CASE WHEN json_type(json_extract(n.meta, '$.weak')) = 'ARRAY' THEN list_transform(
                 list_filter(CAST(json_extract(n.meta, '$.weak') AS JSON[]),
                             lambda m: json_type(m) = 'OBJECT'),
                 lambda m: replace(coalesce(json_extract_string(m, '$.reason'), 'None'), '_', ' ')
                           || ': ' || coalesce(json_extract_string(m, '$.node_id'), 'None'))
             ELSE [] END AS marks
    FROM n LEFT JOIN n AS p ON p.node_id = n.parent_id
    WHERE n.node_type NOT IN ('answer', 'note')),
items AS (
    SELECT q.seq, q.shown, joined OR len(marks) > 0 AS weak, coalesce(f.unsupported, 0) AS unsupported,
        coalesce(f.answered, 0) AS answered,
        json_object(
            'id', q.node_id,
            'parent', CASE WHEN under_answer THEN above_answer ELSE q.parent_id END,
            'via', CASE WHEN under_answer THEN q.parent_id END,
            'depth', q.depth, 'seq', q.seq, 'text', q.text, 'status', shown, 'reason', q.status_reason,
            'error', CASE WHEN shown = '{FAILED}' THEN {_clip(_ERROR)} END,
            'weak', joined OR len(marks) > 0,
            'weak_reasons', CASE WHEN joined THEN list_prepend('{JOINED}', marks) ELSE marks END,
            'owner', q.owner,
            'answers', coalesce(f.answers, []),
            'notes', coalesce(f.notes, []),
            'synthesis', {_clip("json_extract_string(q.meta, '$.synthesis')")},
            'root', q.parent_id IS NULL,
            'track', json_extract_string(q.meta, '$.track.name'),
            'unsupported', coalesce(f.unsupported, 0)) AS item
    FROM q LEFT JOIN folded AS f ON f.question = q.node_id)
SELECT coalesce(to_json(list(item ORDER BY seq)), '[]'), count(*), histogram(shown),
    count(*) FILTER (WHERE weak), coalesce(sum(unsupported), 0), coalesce(sum(answered), 0)
FROM items
""",
    postgresql=f"""
WITH n AS (
    SELECT node_id, parent_id, node_type, text, depth, status, status_reason, owner, seq,
           metadata::jsonb AS meta
    FROM nodes WHERE graph_id = ?),
folded AS (
    SELECT parent_id AS question,
        json_agg(CASE WHEN meta ->> 'support' IS NULL
                      THEN json_build_object('id', node_id, 'text', {_clip("text")})
                      ELSE json_build_object('id', node_id, 'text', {_clip("text")},
                                             'support', meta ->> 'support') END
                 ORDER BY seq) FILTER (WHERE node_type = 'answer') AS answers,
        json_agg(json_build_object('id', node_id, 'text', {_clip("text")}) ORDER BY seq)
            FILTER (WHERE node_type = 'note') AS notes,
        count(*) FILTER (WHERE meta ->> 'support' = '{UNSUPPORTED}') AS unsupported,
        count(*) FILTER (WHERE node_type = 'answer') AS answered
    FROM n WHERE node_type IN ('answer', 'note') GROUP BY parent_id),
q AS (
    SELECT n.*, p.node_type = 'answer' AS under_answer, p.parent_id AS above_answer,
        CASE WHEN n.status = 'error' OR (n.status = 'saturated' AND n.status_reason = 'error')
             THEN '{FAILED}'
             WHEN n.status = 'saturated' AND n.status_reason = '{PRUNED}' THEN '{PRUNED}'
             ELSE n.status END AS shown,
        coalesce(n.meta -> 'synthesis_failed' = 'true'::jsonb, false) AS joined,
        CASE WHEN jsonb_typeof(n.meta -> 'weak') = 'array' THEN ARRAY(
                 SELECT replace(coalesce(m ->> 'reason', 'None'), '_', ' ')
                        || ': ' || coalesce(m ->> 'node_id', 'None')
                 FROM jsonb_array_elements(n.meta -> 'weak') WITH ORDINALITY AS mark(m, i)
                 WHERE jsonb_typeof(m) = 'object' ORDER BY i)
             ELSE ARRAY[]::text[] END AS marks
    FROM n LEFT JOIN n AS p ON p.node_id = n.parent_id
    WHERE n.node_type NOT IN ('answer', 'note')),
items AS (
    SELECT q.seq, q.shown, joined OR cardinality(marks) > 0 AS weak,
        coalesce(f.unsupported, 0) AS unsupported, coalesce(f.answered, 0) AS answered,
        json_build_object(
            'id', q.node_id,
            'parent', CASE WHEN under_answer THEN above_answer ELSE q.parent_id END,
            'via', CASE WHEN under_answer THEN q.parent_id END,
            'depth', q.depth, 'seq', q.seq, 'text', q.text, 'status', shown, 'reason', q.status_reason,
            'error', CASE WHEN shown = '{FAILED}' THEN {_clip(_ERROR_PG)} END,
            'weak', joined OR cardinality(marks) > 0,
            'weak_reasons', CASE WHEN joined THEN array_prepend('{JOINED}', marks) ELSE marks END,
            'owner', q.owner,
            'answers', coalesce(f.answers, '[]'::json),
            'notes', coalesce(f.notes, '[]'::json),
            'synthesis', {_clip("(q.meta ->> 'synthesis')")},
            'root', q.parent_id IS NULL,
            'track', q.meta #>> '{{track,name}}',
            'unsupported', coalesce(f.unsupported, 0)) AS item
    FROM q LEFT JOIN folded AS f ON f.question = q.node_id)
SELECT coalesce(json_agg(item ORDER BY seq)::text, '[]'), count(*),
    (SELECT json_object_agg(shown, shown_count)::text
     FROM (SELECT shown, count(*) AS shown_count FROM items GROUP BY shown) AS by_status),
    count(*) FILTER (WHERE weak), coalesce(sum(unsupported), 0)::bigint, coalesce(sum(answered), 0)::bigint
FROM items
""",
)

# The cross-branch links, each with the questions of the answers it joins, in creation order.
LINKS = Per(
    duckdb="""
SELECT coalesce(to_json(list(json_object(
        'id', e.from_node || '|' || e.to_node || '|' || e.edge_type,
        'type', e.edge_type,
        'from_node', e.from_node,
        'to_node', e.to_node,
        'from_question', CASE WHEN a.node_type = 'answer' THEN a.parent_id ELSE e.from_node END,
        'to_question', CASE WHEN b.node_type = 'answer' THEN b.parent_id ELSE e.to_node END,
        'note', coalesce(nullif(json_extract_string(e.metadata, '$.insight'), ''),
                         nullif(json_extract_string(e.metadata, '$.tension'), ''), ''))
    ORDER BY e.seq)), '[]'), count(*)
FROM edges AS e
LEFT JOIN nodes AS a ON a.node_id = e.from_node AND a.graph_id = e.graph_id
LEFT JOIN nodes AS b ON b.node_id = e.to_node AND b.graph_id = e.graph_id
WHERE e.graph_id = ?
""",
    postgresql="""
SELECT coalesce(json_agg(json_build_object(
        'id', e.from_node || '|' || e.to_node || '|' || e.edge_type,
        'type', e.edge_type,
        'from_node', e.from_node,
        'to_node', e.to_node,
        'from_question', CASE WHEN a.node_type = 'answer' THEN a.parent_id ELSE e.from_node END,
        'to_question', CASE WHEN b.node_type = 'answer' THEN b.parent_id ELSE e.to_node END,
        'note', coalesce(nullif(e.metadata::jsonb ->> 'insight', ''),
                         nullif(e.metadata::jsonb ->> 'tension', ''), ''))
    ORDER BY e.seq)::text, '[]'), count(*)
FROM edges AS e
LEFT JOIN nodes AS a ON a.node_id = e.from_node AND a.graph_id = e.graph_id
LEFT JOIN nodes AS b ON b.node_id = e.to_node AND b.graph_id = e.graph_id
WHERE e.graph_id = ?
""",
)


def _cited(dialect: Dialect) -> str:
    support, track = (
        json_text(dialect, "metadata", "support"),
        json_text(dialect, "metadata", TRACK_KEY, "name"),
    )
    return f"""
SELECT count(*) > 0 FROM nodes WHERE graph_id = ?
    AND ({support} IS NOT NULL
         OR {track} IS NOT NULL)
"""


# Whether any answer carries a support value or any question a track: the page's Evidence
# section reads the nodes' metadata only then (evidence_report.evidence_of).
CITED = Per(duckdb=_cited(Dialect.DUCKDB), postgresql=_cited(Dialect.POSTGRESQL))


class QuestionFold:
    """A whole graph's question items, folded by the database (its dialect's statements, picked once)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._questions, self._links = pick(QUESTIONS, db.dialect), pick(LINKS, db.dialect)
        self._cited = pick(CITED, db.dialect)

    def items(self, graph_id: str, status: str, last_event_id: int) -> QuestionItems:
        """The whole graph's question items and links as JSON text, with the view's counts.

        Called inside the caller's read transaction (``GraphQueries.get_question_items``),
        so the items, links and the event id they reach come from one moment.
        """
        row = self._db.fetchone(self._questions, [graph_id])
        links = self._db.fetchone(self._links, [graph_id])
        assert row is not None and links is not None  # aggregates: one row each
        questions, count, by_status, weak, unsupported, answers = row
        # DuckDB's histogram is a map; PostgreSQL's, JSON text (NULL: no questions, on either)
        tally = json.loads(by_status) if isinstance(by_status, str) else dict(by_status or {})
        counts = {s: int(tally.get(s, 0)) for s in VIEW_STATUSES}
        counts |= {"weak": int(weak), UNSUPPORTED: int(unsupported), "answers": int(answers)}
        counts["total"] = count + int(answers)
        return {
            "graph_id": graph_id,
            "status": status,
            "last_event_id": last_event_id,
            "questions": questions,
            "question_count": count,
            "links": links[0],
            "link_count": links[1],
            "counts": counts,
            "cited": self.carries_evidence(graph_id),
        }

    def carries_evidence(self, graph_id: str) -> bool:
        """Whether some answer of the graph carries a support value or some question a track."""
        row = self._db.fetchone(self._cited, [graph_id])
        return bool(row and row[0])
