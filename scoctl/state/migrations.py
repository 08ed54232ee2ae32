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
    # 2: reclaim notices (DESIGN §14): what `scoctl notice` announced, and every noticed
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
)
