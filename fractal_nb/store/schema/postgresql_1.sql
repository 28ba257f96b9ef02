-- fractal_nb graph store on PostgreSQL, version 1: what PostgreSQL adds to the tables of schema.sql
-- (store/postgres.py applies schema.sql, with PostgreSQL's types, then these, in one transaction).
-- A later change is a new file here, numbered, applied once (store_info.schema_version); a change
-- to schema.sql bumps postgres.SCHEMA_VERSION too, so a PostgreSQL store applies it once.

-- The lookups PostgreSQL needs an index for (DuckDB's zone maps serve them from insertion order).
CREATE INDEX IF NOT EXISTS nodes_by_graph ON nodes (graph_id, seq);
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes (graph_id, parent_id);
CREATE INDEX IF NOT EXISTS nodes_by_question ON nodes (graph_id, question_id);
CREATE INDEX IF NOT EXISTS nodes_open ON nodes (graph_id, depth, seq)
    WHERE node_type = 'question' AND status IN ('open', 'claimed');
CREATE INDEX IF NOT EXISTS nodes_held ON nodes (holder) WHERE status = 'claimed';
CREATE INDEX IF NOT EXISTS events_by_graph ON events (graph_id, event_id);
CREATE INDEX IF NOT EXISTS edges_by_graph ON edges (graph_id, seq);
CREATE INDEX IF NOT EXISTS node_history_by_node ON node_history (graph_id, node_id, event_id);
CREATE INDEX IF NOT EXISTS graph_history_by_graph ON graph_history (graph_id, event_id);
CREATE INDEX IF NOT EXISTS llm_calls_by_graph ON llm_calls (graph_id, call_id);
CREATE INDEX IF NOT EXISTS source_chunks_by_source ON source_chunks (graph_id, source_id);
