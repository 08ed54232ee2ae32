"""Numbered schema migrations. `PRAGMA user_version` records the version a file is at.

Append new migrations; never edit a released one. Each runs in the transaction that bumps the
version, so a crash leaves the file at the previous version.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: the first schema
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

    CREATE TABLE workloads (
        id INTEGER PRIMARY KEY,
        slug TEXT NOT NULL,
        kind TEXT NOT NULL,
        source TEXT NOT NULL,
        contract TEXT NOT NULL,
        status TEXT NOT NULL,
        created TEXT NOT NULL,
        updated TEXT NOT NULL,
        last_token TEXT,
        last_queued_reason TEXT,
        job_id TEXT,
        namespace TEXT
    );
    CREATE UNIQUE INDEX workloads_one_active ON workloads(slug)
        WHERE status IN ('pending', 'queued', 'preparing', 'running');
    CREATE INDEX workloads_slug ON workloads(slug, id);
    CREATE INDEX workloads_job ON workloads(job_id);

    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts TEXT NOT NULL,
        workload TEXT,
        workload_id INTEGER,
        token TEXT NOT NULL,
        level TEXT NOT NULL,
        status TEXT,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX events_workload ON events(workload, id);
    CREATE INDEX events_ts ON events(ts);
    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

    CREATE TABLE claims (
        workload TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        contract TEXT NOT NULL,
        requests TEXT NOT NULL,
        largest_pod TEXT NOT NULL,
        pods INTEGER NOT NULL,
        tolerates_reclaimable INTEGER NOT NULL DEFAULT 1,
        source TEXT NOT NULL,
        nodes TEXT NOT NULL DEFAULT '[]',
        updated TEXT NOT NULL
    );

    CREATE TABLE plan_generations (
        generation INTEGER PRIMARY KEY AUTOINCREMENT,
        created TEXT NOT NULL,
        ranking TEXT,
        changed TEXT NOT NULL,
        full INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE plan_workloads (
        workload TEXT PRIMARY KEY,
        generation INTEGER NOT NULL,
        claim_version INTEGER NOT NULL,
        contract TEXT NOT NULL,
        ranking TEXT,
        feasible INTEGER NOT NULL,
        degraded INTEGER NOT NULL,
        reasons TEXT NOT NULL,
        exclusions TEXT NOT NULL DEFAULT '[]',
        explain TEXT NOT NULL DEFAULT '[]'
    );
    CREATE TABLE plan_units (
        workload TEXT NOT NULL,
        pool TEXT NOT NULL,
        tier TEXT NOT NULL,
        grp TEXT NOT NULL,
        units INTEGER NOT NULL,
        share REAL NOT NULL,
        score REAL NOT NULL,
        PRIMARY KEY (workload, pool)
    );

    CREATE TABLE launches (
        launch_id TEXT PRIMARY KEY,
        region TEXT NOT NULL,
        workload TEXT NOT NULL,
        pool TEXT NOT NULL,
        generation INTEGER NOT NULL,
        count INTEGER NOT NULL,
        status TEXT NOT NULL,
        created TEXT NOT NULL,
        updated TEXT NOT NULL,
        reservation_id TEXT,
        error TEXT,
        node_names TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX launches_status ON launches(status);

    CREATE TABLE instances (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        region TEXT NOT NULL,
        workload TEXT,
        pool TEXT,
        generation INTEGER,
        launch_id TEXT,
        status TEXT NOT NULL,
        created TEXT NOT NULL,
        updated TEXT NOT NULL,
        active_at TEXT,
        ready_at TEXT,
        idle_since TEXT,
        fault TEXT,
        node_name TEXT
    );
    CREATE INDEX instances_workload ON instances(workload, pool);

    CREATE TABLE exclusions (
        pool TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        until TEXT NOT NULL
    );

    CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 2: typed tables for what schema 1 kept as JSON under string keys in `kv`; each value is
    # carried over (a value of a shape scoctl never wrote is left behind), then `kv` goes
    """
    CREATE TABLE plan_dirty (workload TEXT PRIMARY KEY, reason TEXT NOT NULL);
    INSERT INTO plan_dirty (workload, reason)
        SELECT d.key, d.value FROM kv, json_each(kv.value) AS d
        WHERE kv.key = 'plan:dirty' AND json_type(kv.value) = 'object' AND d.type = 'text';

    CREATE TABLE ranking_last_scores (pool TEXT PRIMARY KEY, score REAL NOT NULL);
    INSERT INTO ranking_last_scores (pool, score)
        SELECT s.key, s.value FROM kv, json_each(kv.value) AS s
        WHERE kv.key = 'ranking:last_scores' AND json_type(kv.value) = 'object'
          AND s.type IN ('integer', 'real');

    CREATE TABLE ranking_last_good (
        only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
        url TEXT NOT NULL,
        ranking_id TEXT NOT NULL,
        fetched TEXT NOT NULL
    );
    INSERT INTO ranking_last_good (only_row, url, ranking_id, fetched)
        SELECT 1, json_extract(value, '$.url'), json_extract(value, '$.id'),
               json_extract(value, '$.fetched')
        FROM kv WHERE key = 'ranking:last_good' AND json_type(value) = 'object'
          AND json_type(value, '$.url') = 'text' AND json_type(value, '$.id') = 'text'
          AND json_type(value, '$.fetched') = 'text';
    CREATE TABLE ranking_last_good_scores (pool TEXT PRIMARY KEY, score REAL NOT NULL);
    INSERT INTO ranking_last_good_scores (pool, score)
        SELECT s.key, s.value FROM kv, json_each(kv.value, '$.scores') AS s
        WHERE kv.key = 'ranking:last_good' AND EXISTS (SELECT 1 FROM ranking_last_good)
          AND json_type(kv.value, '$.scores') = 'object' AND s.type IN ('integer', 'real');

    CREATE TABLE orphans_seen (
        region TEXT NOT NULL,
        server_id TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        PRIMARY KEY (region, server_id)
    );
    INSERT INTO orphans_seen (region, server_id, first_seen)
        SELECT r.key, o.key, o.value FROM kv, json_each(kv.value) AS r, json_each(r.value) AS o
        WHERE kv.key = 'reconcile:orphans_seen' AND json_type(kv.value) = 'object'
          AND r.type = 'object' AND o.type = 'text';

    CREATE TABLE slurm_suspended (node TEXT PRIMARY KEY);
    INSERT OR IGNORE INTO slurm_suspended (node)
        SELECT n.value FROM kv, json_each(kv.value) AS n
        WHERE kv.key = 'slurm:suspended' AND json_type(kv.value) = 'array' AND n.type = 'text';

    CREATE TABLE slurm_node_shapes (
        node TEXT NOT NULL,
        resource TEXT NOT NULL,
        amount INTEGER NOT NULL,
        PRIMARY KEY (node, resource)
    );
    INSERT INTO slurm_node_shapes (node, resource, amount)
        SELECT n.key, r.key, r.value FROM kv, json_each(kv.value) AS n, json_each(n.value) AS r
        WHERE kv.key = 'slurm:node_shapes' AND json_type(kv.value) = 'object'
          AND n.type = 'object' AND r.type = 'integer';

    CREATE TABLE metric_cloud_calls (
        region TEXT NOT NULL,
        outcome TEXT NOT NULL,
        calls INTEGER NOT NULL,
        PRIMARY KEY (region, outcome)
    );
    INSERT INTO metric_cloud_calls (region, outcome, calls)
        SELECT substr(c.key, 1, instr(c.key, char(31)) - 1),
               substr(c.key, instr(c.key, char(31)) + 1), c.value
        FROM kv, json_each(kv.value) AS c
        WHERE kv.key = 'metrics:cloud_calls' AND json_type(kv.value) = 'object'
          AND instr(c.key, char(31)) > 0 AND c.type = 'integer';
    CREATE TABLE metric_tokens_spent (region TEXT PRIMARY KEY, tokens INTEGER NOT NULL);
    INSERT INTO metric_tokens_spent (region, tokens)
        SELECT t.key, t.value FROM kv, json_each(kv.value) AS t
        WHERE kv.key = 'metrics:tokens_spent' AND json_type(kv.value) = 'object'
          AND t.type = 'integer';
    CREATE TABLE run_last_success (
        only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
        at REAL NOT NULL
    );
    INSERT INTO run_last_success (only_row, at)
        SELECT 1, json_extract(value, '$') FROM kv
        WHERE key = 'run:last_success' AND json_type(value) IN ('integer', 'real');

    DROP TABLE kv;
    """,
    # 3: retention (core.retention). Events stay append-only: no UPDATE ever, and a DELETE only
    # through the pruning path — `Store.prune_events` names its cutoff in `events_prune` inside
    # its transaction — of a row older than that cutoff and more than a day older than the
    # newest event. Indexes for pruning ended instances and settled launches oldest first.
    """
    CREATE TABLE events_prune (
        only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
        before TEXT NOT NULL
    );
    DROP TRIGGER events_no_delete;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        WHEN NOT COALESCE(
            OLD.ts < (SELECT before FROM events_prune WHERE only_row = 1)
            AND OLD.ts < strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT max(ts) FROM events), '-1 day'),
            0)
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE INDEX instances_ended ON instances(status, updated);
    CREATE INDEX launches_settled ON launches(status, updated);
    """,
    # 4: placement latency (design: Controller): open sightings of demand, histograms, recent
    # samples
    """
    CREATE TABLE demand_sightings (
        workload TEXT PRIMARY KEY,
        claim_version INTEGER NOT NULL,
        seen REAL NOT NULL,
        planned REAL
    );
    CREATE TABLE latency_histograms (
        metric TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (metric, bucket)
    );
    CREATE TABLE latency_totals (
        metric TEXT PRIMARY KEY,
        total REAL NOT NULL
    );
    CREATE TABLE latency_samples (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        metric TEXT NOT NULL,
        workload TEXT NOT NULL,
        seconds REAL NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX latency_samples_metric ON latency_samples(metric, id);
    """,
    # 5: reclaim notices (design: Notices): what `scoctl notice` announced, and every noticed
    # instance from the notice to its end (kept afterwards: the reclaim metrics count them)
    """
    CREATE TABLE reclaim_notices (
        kind TEXT NOT NULL,
        target TEXT NOT NULL,
        region TEXT NOT NULL,
        deadline TEXT NOT NULL,
        received TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (kind, target)
    );

    CREATE TABLE noticed_instances (
        server_id TEXT NOT NULL,
        noticed_at TEXT NOT NULL,
        region TEXT NOT NULL,
        name TEXT NOT NULL,
        workload TEXT,
        pool TEXT,
        deadline TEXT NOT NULL,
        source TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        cordoned INTEGER NOT NULL DEFAULT 0,
        drain_forced INTEGER NOT NULL DEFAULT 0,
        requeued INTEGER NOT NULL DEFAULT 0,
        evicted INTEGER NOT NULL DEFAULT 0,
        pods_deleted INTEGER NOT NULL DEFAULT 0,
        outcome TEXT,
        closed_at TEXT,
        replacement_ready_at TEXT,
        PRIMARY KEY (server_id, noticed_at)
    );
    CREATE UNIQUE INDEX noticed_one_open ON noticed_instances(server_id) WHERE outcome IS NULL;
    """,
    # 6: the pools a claim's pod placement rules out, each with the constraint (design: Constraints)
    """
    ALTER TABLE claims ADD COLUMN ineligible TEXT NOT NULL DEFAULT '{}';
    """,
    # 7: disruptions (design: Disruption): each instance's disruption reason and start (in flight
    # from
    # its start until the server is gone or the unit is back in service; the start stays for
    # the budgets' rates), since when its node is unhealthy, its launch spec hash (Drift); and
    # the (workload, reason)s a budget holds back now (DISRUPTION_BLOCKED once per change)
    """
    ALTER TABLE instances ADD COLUMN disruption TEXT;
    ALTER TABLE instances ADD COLUMN disruption_at TEXT;
    ALTER TABLE instances ADD COLUMN unhealthy_since TEXT;
    ALTER TABLE instances ADD COLUMN spec_hash TEXT;
    CREATE INDEX instances_disrupted ON instances(disruption_at);
    CREATE TABLE disruption_blocks (
        workload TEXT NOT NULL,
        reason TEXT NOT NULL,
        budget INTEGER NOT NULL,
        until TEXT,
        PRIMARY KEY (workload, reason)
    );
    """,
    # 8: the maxSkew of a claim's pods' DoNotSchedule zone topology spread, 0: none; per
    # flavor, what the DaemonSet pods on a new unit of the claim request (Constraints)
    """
    ALTER TABLE claims ADD COLUMN zone_spread INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE claims ADD COLUMN overhead TEXT NOT NULL DEFAULT '{}';
    """,
    # 9: drift (design: Drift): each recorded launch spec's canonical values by hash (the
    # template as its digest), so `UNIT_DRIFTED` names the fields in any process; the id each
    # region's launch image name resolved to when last asked (what `status` compares with);
    # each instance's configured Node label keys (a key the config drops is removed); a
    # claim's parts, split by where its pods may run, and its soft terms' weight per pool
    # (Constraints)
    """
    CREATE TABLE launch_specs (
        hash TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        recorded TEXT NOT NULL
    );
    CREATE TABLE image_ids (
        region TEXT NOT NULL,
        name TEXT NOT NULL,
        image_id TEXT NOT NULL,
        seen TEXT NOT NULL,
        PRIMARY KEY (region, name)
    );
    ALTER TABLE instances ADD COLUMN labels TEXT;
    ALTER TABLE claims ADD COLUMN parts TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE claims ADD COLUMN preferred TEXT NOT NULL DEFAULT '{}';
    """,
    # 10: rebalance (design: Rebalance): each workload's trigger and since when it has held, carried
    # between passes for `rebalance.stabilize`, the units it moves, and when it was planned
    """
    CREATE TABLE rebalances (
        workload TEXT PRIMARY KEY,
        trigger TEXT NOT NULL,
        since TEXT NOT NULL,
        moves TEXT NOT NULL DEFAULT '[]',
        planned TEXT
    );
    """,
    # 11: gangs (design: Gangs): a claim's members per gang (0: not a gang); each gang's launch,
    # failures and when it was provisioned, carried between passes (Unix seconds)
    """
    ALTER TABLE claims ADD COLUMN gang INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE gangs (
        workload TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        launched_at REAL,
        failures INTEGER NOT NULL DEFAULT 0,
        failed_at REAL,
        provisioned_at REAL
    );
    """,
    # 12: operator controls: a pause of launches or of disruptions (`scoctl pause`), obeyed by
    # every runner of the state until `until` or `scoctl resume`; the voluntary disruptions
    # started, per workload, reason and decision (delete, replace), for the metrics; each
    # claim version's requests and when it was written (showback's requested resources)
    """
    CREATE TABLE pauses (
        scope TEXT PRIMARY KEY,
        since TEXT NOT NULL,
        until TEXT,
        reason TEXT NOT NULL,
        author TEXT NOT NULL
    );
    CREATE TABLE metric_disruptions (
        workload TEXT NOT NULL,
        reason TEXT NOT NULL,
        decision TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (workload, reason, decision)
    );
    CREATE TABLE claim_history (
        workload TEXT NOT NULL,
        version INTEGER NOT NULL,
        at TEXT NOT NULL,
        requests TEXT NOT NULL,
        PRIMARY KEY (workload, version)
    );
    CREATE INDEX claim_history_at ON claim_history(at);
    CREATE TABLE metric_cost (workload TEXT PRIMARY KEY, cost REAL NOT NULL);
    CREATE TABLE metric_cost_at (only_row INTEGER PRIMARY KEY, at REAL NOT NULL);
    """,
    # 13: gangs (design: Gangs): the last failure was a NoValidHost zone, now excluded, so the
    # next launch goes elsewhere waiting for no back-off
    """
    ALTER TABLE gangs ADD COLUMN relocate INTEGER NOT NULL DEFAULT 0;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
