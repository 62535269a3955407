"""The ledger's query caps: ROC-GLM evaluations per survivor function, survivor functions and models per population.

A cap is no privacy charge: it bounds how many exact answers could be differenced. Its counts are kept
in the ledger's SQLite file, in the ledger's transactions.
"""

from __future__ import annotations

from ..errors import ResourceExhausted

__all__ = ["SqliteQueryCaps"]


class SqliteQueryCaps:
    """The query caps of :class:`site_node.store.ledger.SqliteLedger`, kept in its SQLite file.

    A part of the ledger: it uses the ledger's database ``_db``, its lock ``_lock`` and its
    ``_transaction``.
    """

    def use_evaluation(self, key, cap, *, query):
        used = []

        def body(db):
            used.append(self._used(key))
            if db.execute("SELECT 1 FROM glm_answered WHERE population=? AND source=? AND outcome=? AND survivor=? "
                          "AND query=?", (*key, query)).fetchone():
                used[0] -= 1  # a repeat: free
                return
            if used[0] >= cap:
                raise ResourceExhausted(
                    f"query cap: this site answers at most {cap} ROC-GLM evaluations per uploaded survivor function"
                )
            db.execute("INSERT INTO glm_evaluations VALUES (?,?,?,?,?) ON CONFLICT DO UPDATE SET used = used + 1",
                       (*key, 1))
            db.execute("INSERT INTO glm_answered VALUES (?,?,?,?,?)", (*key, query))

        # Not fsynced: a fit asks 4-6 evaluations of every site in a row, and an fsync each (~4 ms on this
        # machine's disk) was most of a round trip. The count still survives a crash of the daemon (kill
        # -9: tests/site/test_kill.py); a power failure could forget the last few, never a release.
        self._transaction(body, synced=False)
        return cap - used[0] - 1

    def _used(self, key) -> int:
        row = self._db.execute(
            "SELECT used FROM glm_evaluations WHERE population=? AND source=? AND outcome=? AND survivor=?", key
        ).fetchone()
        return 0 if row is None else int(row[0])

    def evaluations_left(self, key, cap):
        with self._lock:
            return max(cap - self._used(key), 0)

    def record_survivors(self, keys, cap):
        def body(db):
            for key in keys:
                seen = db.execute("SELECT 1 FROM survivor_uploads WHERE population=? AND source=? AND outcome=? "
                                  "AND score_class=? AND survivor=?", key).fetchone()
                if seen is not None:
                    continue
                (count,) = db.execute("SELECT COUNT(*) FROM survivor_uploads WHERE population=? AND source=? "
                                      "AND outcome=? AND score_class=?", key[:4]).fetchone()
                if count >= cap:
                    raise ResourceExhausted(
                        f"query cap: this site accepts at most {cap} different survivor functions per population, "
                        "score source, outcome and class"
                    )
                db.execute("INSERT INTO survivor_uploads VALUES (?,?,?,?,?)", key)

        # Not fsynced, as the ROC-GLM evaluations (a query cap, not a release): it survives a crash or kill of
        # the daemon; a power failure could forget the last few, never a release.
        self._transaction(body, synced=False)

    def record_model(self, population, source, cap):
        def body(db):
            if db.execute("SELECT 1 FROM models WHERE population=? AND source=?", (population, source)).fetchone():
                return
            (count,) = db.execute("SELECT COUNT(*) FROM models WHERE population=?", (population,)).fetchone()
            if count >= cap:
                raise ResourceExhausted(
                    f"query cap: this site accepts at most {cap} different models for the patients of one population; "
                    "answers about different models could be differenced down to single patients"
                )
            db.execute("INSERT INTO models VALUES (?,?)", (population, source))

        self._transaction(body)
