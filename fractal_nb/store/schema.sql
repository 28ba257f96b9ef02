-- fractal_nb graph store schema (DuckDB). Statements are separated by ';'.
-- Hot columns (status, owner, claimed_at) carry no secondary index: DuckDB turns
-- updates of indexed columns into delete+insert (docs/architecture/store.md, "Store rules", concurrency).

CREATE TABLE IF NOT EXISTS store_info (
    key VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

CREATE SEQUENCE IF NOT EXISTS node_seq START 1;     -- creation order of nodes and links
CREATE SEQUENCE IF NOT EXISTS event_seq START 1;
CREATE SEQUENCE IF NOT EXISTS call_seq START 1;

CREATE TABLE IF NOT EXISTS graphs (
    graph_id VARCHAR PRIMARY KEY,
    seed VARCHAR NOT NULL,
    intensity VARCHAR NOT NULL,
    checkpoint_mode VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    status_reason VARCHAR,
    root_node_id VARCHAR NOT NULL,
    metadata VARCHAR NOT NULL,          -- JSON object
    created_at DOUBLE NOT NULL,         -- seconds since the epoch, store clock
    updated_at DOUBLE NOT NULL
);

CREATE TABLE IF NOT EXISTS nodes (
    node_id VARCHAR PRIMARY KEY,
    graph_id VARCHAR NOT NULL,
    seq BIGINT NOT NULL,                -- creation order, the order of every listing
    parent_id VARCHAR,
    question_id VARCHAR,                -- the question this node hangs under (answers:
                                        -- their question; questions: parent question)
    branch_id VARCHAR,                  -- the depth-1 question this node descends from
    path VARCHAR NOT NULL,              -- ids of the questions above, root first, '/'-joined
    node_type VARCHAR NOT NULL,
    text VARCHAR NOT NULL,
    depth INTEGER NOT NULL,             -- question level; an answer has its question's
    status VARCHAR NOT NULL,
    status_reason VARCHAR,              -- saturation reason or error message
    inherited_from VARCHAR,             -- node whose saturation cascaded here
    owner VARCHAR,
    claimed_at DOUBLE,                  -- lease start, store clock
    lease_s DOUBLE,
    metadata VARCHAR NOT NULL,          -- JSON object
    created_at DOUBLE NOT NULL,
    updated_at DOUBLE NOT NULL
);
-- Schema 2: the holder of a claim (holders.holder_id); files of schema 1 gain the column.
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS holder VARCHAR;
-- What a question is compared by (fractal_nb/text.py normalize): a worker's sub-question that
-- repeats one asked anywhere in the graph is not asked again. Older files are keyed once, here.
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS question_key VARCHAR;
UPDATE nodes SET question_key = rtrim(lower(regexp_replace(trim(text), '\s+', ' ', 'g')), '?.!: ')
    WHERE question_key IS NULL AND node_type = 'question';

-- Who holds claims: a process (host, pid, start time) and one store or remote worker in it.
-- A live holder renews its claims' leases (heartbeat); a gone one's claims are recovered.
CREATE TABLE IF NOT EXISTS holders (
    holder_id VARCHAR PRIMARY KEY,
    host VARCHAR NOT NULL,
    pid INTEGER NOT NULL,
    proc_start VARCHAR,                 -- tells a reused pid apart
    label VARCHAR NOT NULL,             -- what it is: an exploration's store, a remote worker
    seen_at DOUBLE NOT NULL             -- last heartbeat, store clock
);

-- A synthesis handed to one worker at a time (across processes), so each is paid once.
-- A row lives while the worker composes it; a synthesized node's row is deleted.
CREATE TABLE IF NOT EXISTS synthesis_claims (
    node_id VARCHAR PRIMARY KEY,
    graph_id VARCHAR NOT NULL,
    worker VARCHAR NOT NULL,
    holder VARCHAR,
    claimed_at DOUBLE NOT NULL,         -- lease start, renewed by the holder's heartbeat
    lease_s DOUBLE NOT NULL
);

-- Cross-branch links only: parent_child edges are read off nodes.parent_id.
CREATE TABLE IF NOT EXISTS edges (
    seq BIGINT NOT NULL,                -- from node_seq, so links and nodes share one order
    graph_id VARCHAR NOT NULL,
    from_node VARCHAR NOT NULL,
    to_node VARCHAR NOT NULL,
    edge_type VARCHAR NOT NULL,
    metadata VARCHAR NOT NULL,          -- JSON object: insight / tension
    created_at DOUBLE NOT NULL
);

-- Append-only: one row per mutation. The live view reads it from the last id it
-- has seen; nothing ever updates or deletes a row here.
CREATE TABLE IF NOT EXISTS events (
    event_id BIGINT NOT NULL,
    graph_id VARCHAR NOT NULL,
    node_id VARCHAR,
    kind VARCHAR NOT NULL,
    actor VARCHAR,
    created_at DOUBLE NOT NULL,
    payload VARCHAR NOT NULL            -- JSON object
);

-- One row per model call, failed ones included: cost and failures as a DataFrame.
CREATE TABLE IF NOT EXISTS llm_calls (
    call_id BIGINT NOT NULL,
    graph_id VARCHAR,
    node_id VARCHAR,
    worker VARCHAR,
    role VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    attempts INTEGER NOT NULL,         -- requests that reached the server (0: none did)
    latency_s DOUBLE NOT NULL,
    outcome VARCHAR NOT NULL,          -- ok | cached | error | discarded (paid, then refused)
    error VARCHAR,
    created_at DOUBLE NOT NULL
);
-- Schema 2: what the server saw of each call. attempts counts its HTTP requests (transport
-- retries and correction round trips included); queue_s the wait for a free slot (the rest
-- of latency_s is the model's); mode how structured output was asked for.
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS corrections INTEGER DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS queue_s DOUBLE DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS mode VARCHAR;
-- Tokens are the server's figures; true where it reported none and the backend estimated them
-- (NULL in the rows of older files: not recorded then).
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS tokens_estimated BOOLEAN;
-- How the retries after a refused reply were sampled, as JSON: [{"seed": 12, "temperature": 0.5}, ...]
-- (llm/openai_llm.py varies them, so a retry does not get the same reply again); NULL: no retry.
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS retry_sampling VARCHAR;
-- Usage figures the server reported that no completion can have (not a whole number of tokens
-- from 0 to 10,000,000: 10^12, -10^6, text), as it sent them, as JSON: [{"prompt_tokens":
-- 1000000000000}, ...]; the row's tokens are then estimated (tokens_estimated). NULL: every figure
-- taken as reported (and in the rows of older files). Issue 37.
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS refused_usage VARCHAR;

-- Record/replay cache of completions, keyed by a hash of model, schema and messages.
CREATE TABLE IF NOT EXISTS llm_cache (
    cache_key VARCHAR PRIMARY KEY,
    model VARCHAR NOT NULL,
    role VARCHAR NOT NULL,
    response VARCHAR NOT NULL,         -- JSON object
    created_at DOUBLE NOT NULL
);

-- Issue 25 (turns): turns and heads, superseded nodes, deepened branches (docs/architecture/store.md,
-- "Turns and heads"). A turn is one stretch of work on a graph; it ends in a head at harvest.
CREATE TABLE IF NOT EXISTS turns (
    graph_id VARCHAR NOT NULL,
    turn INTEGER NOT NULL,              -- 1: the seed
    kind VARCHAR NOT NULL,              -- vocabulary.TurnKind of its first request
    requests VARCHAR NOT NULL,          -- JSON list: [{kind, arguments, created, reopened}, ...]
    started_event BIGINT NOT NULL,      -- the event that opened it
    head_event BIGINT,                  -- the event it ended at (NULL while open)
    status VARCHAR,                     -- the graph's status at the head
    root_synthesis VARCHAR,             -- the root's synthesis at the head
    counts VARCHAR,                     -- JSON object: questions by status at the head, superseded nodes
    tokens BIGINT,                      -- spend at the head (llm_calls of the graph)
    cost DOUBLE,                        -- NULL: no prices
    created_at DOUBLE NOT NULL,
    ended_at DOUBLE
);
-- The turn that superseded a node (NULL: current); a superseded node is kept, never deleted.
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS superseded_turn INTEGER;
-- deepen(): the branch under node_id may go `levels` past the intensity's depth during `turn`.
CREATE TABLE IF NOT EXISTS depth_allowances (
    graph_id VARCHAR NOT NULL,
    node_id VARCHAR NOT NULL,
    turn INTEGER NOT NULL,
    levels INTEGER NOT NULL
);
-- The event of the deepen request that made it (a fork copies the allowances made by its event).
ALTER TABLE depth_allowances ADD COLUMN IF NOT EXISTS made_at BIGINT;

-- Issue 25 (history): the state at any event, and forks (docs/architecture/store.md, "History and forks").
-- Row images written by store/journal.py before each write transaction's COMMIT, keyed by the last
-- event of that commit, with the node_seq / call_seq values then (the watermark: the links with
-- edges.seq and the calls with llm_calls.call_id under them existed). The journal gives them every
-- column nodes / graphs have.
CREATE TABLE IF NOT EXISTS node_history AS
    SELECT 0::BIGINT AS event_id, 0::BIGINT AS max_seq, 0::BIGINT AS max_call_id, * FROM nodes LIMIT 0;
CREATE TABLE IF NOT EXISTS graph_history AS
    SELECT 0::BIGINT AS event_id, 0::BIGINT AS max_seq, 0::BIGINT AS max_call_id, * FROM graphs LIMIT 0;
-- Where a graph's history starts when it did not start with the graph: the first open of a file
-- an older version wrote, and a fork (its "forked" event).
CREATE TABLE IF NOT EXISTS history_baselines (
    graph_id VARCHAR NOT NULL,
    event_id BIGINT NOT NULL
);
-- A fork's origin: the graph and the event it was derived from.
CREATE TABLE IF NOT EXISTS lineage (
    graph_id VARCHAR PRIMARY KEY,       -- the fork
    forked_from VARCHAR NOT NULL,
    forked_at BIGINT NOT NULL,          -- the source's event the fork holds the state of
    created_at DOUBLE NOT NULL
);
-- Which source node each node of a fork copies (the id map of store/lineage.py).
CREATE TABLE IF NOT EXISTS fork_nodes (
    graph_id VARCHAR NOT NULL,          -- the fork
    node_id VARCHAR NOT NULL,           -- the fork's node
    source_node_id VARCHAR NOT NULL     -- the source graph's node it was copied from
);

-- Issue 26 (sources): the evidence a graph's answers cite (docs/architecture/store.md, "Sources and
-- citations"). A source is a text (a file, a snippet, a column, a table's rows) kept whole as
-- chunks, so a citation checks against the text as it was added, whatever the disk holds later.
-- source_id: the first 12 hex of sha256(name || '\0' || content_hash); stable across files and forks.
CREATE TABLE IF NOT EXISTS sources (
    graph_id VARCHAR NOT NULL,
    source_id VARCHAR NOT NULL,
    name VARCHAR NOT NULL,              -- what citations name; one content per name in a graph
    kind VARCHAR NOT NULL,              -- file | snippet | dataframe | table
    location VARCHAR,                   -- a file's absolute path (NULL: not a file)
    content_hash VARCHAR NOT NULL,      -- sha256 of the text as stored
    line_count INTEGER NOT NULL,
    added_at DOUBLE NOT NULL,           -- store clock
    added_event BIGINT NOT NULL         -- the sources_added event (a fork copies those by its event)
);
-- Non-overlapping line windows of a source, cut at blank lines where possible.
-- chunk_id: '<source_id>:<line_start>-<line_end>'; text: its lines joined by '\n'.
CREATE TABLE IF NOT EXISTS source_chunks (
    graph_id VARCHAR NOT NULL,
    chunk_id VARCHAR NOT NULL,
    source_id VARCHAR NOT NULL,
    line_start INTEGER NOT NULL,        -- 1-based, inclusive
    line_end INTEGER NOT NULL,
    text VARCHAR NOT NULL
);
