"""Rewrites a copy of a tuning database so that one workload runs one config.

    rewrite_db.py DB WORKLOAD TEMPLATE CONFIG CONV_JSON

The workload's fastest successful record (of those timed cold, where there
are any, as selection prefers them) becomes TEMPLATE/CONFIG (its text
and index as `mtgpu conv --json` of that config wrote them to CONV_JSON) with the smallest time
of any record, so that selection picks it; another record of the same config
is dropped first (records are unique per workload, template, config and
device), and so are the workload's in-network records and preference, which
would otherwise win. Only the copy is changed (bench/config_ab/run.sh).
Prints the config's text.
"""
import json
import sqlite3
import sys


def main():
    db, workload, tmpl, config, conv_json = sys.argv[1:6]
    lines = [l for l in open(conv_json) if l.startswith("{")]
    if not lines:
        sys.exit(f"rewrite_db: no result in {conv_json}")
    res = json.loads(lines[-1])
    if res.get("status") != "ok":
        sys.exit(f"rewrite_db: {tmpl} {config}: {res.get('status')} {res.get('message', '')}")
    config = res.get("config", config)
    con = sqlite3.connect(db)
    row = con.execute("SELECT id FROM workloads WHERE text = ?", (workload,)).fetchone()
    if not row:
        sys.exit(f"rewrite_db: {db} has no workload {workload}")
    wid = row[0]
    # Selection takes the records timed cold where there are any (records/select.c), so the one rewritten is of those.
    best = None
    for source in ("measured-cold%", "%"):
        best = best or con.execute("SELECT id FROM records WHERE workload_id = ? AND status = 'ok' AND source LIKE ? ORDER BY median_ms LIMIT 1",
                                   (wid, source)).fetchone()
    if not best:
        sys.exit(f"rewrite_db: {db} has no successful record of {workload}")
    fastest = con.execute("SELECT MIN(median_ms) FROM records WHERE status = 'ok'").fetchone()[0]
    with con:
        con.execute("DELETE FROM records WHERE workload_id = ? AND template = ? AND config = ? AND id <> ?", (wid, tmpl, config, best[0]))
        con.execute("DELETE FROM records WHERE workload_id = ? AND source LIKE 'in-network%'", (wid,))
        con.execute("DELETE FROM preferences WHERE workload_id = ?", (wid,))
        con.execute("UPDATE records SET template = ?, config = ?, config_index = ?, median_ms = ? WHERE id = ?",
                    (tmpl, config, res["index"], min(fastest, 0.001) / 2, best[0]))
    con.close()
    print(config)


if __name__ == "__main__":
    main()
