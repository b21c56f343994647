"""The results pages read an index of the latest result per key and point (`result_points`), kept
current as results are stored, instead of grouping every stored result: the index always equals a
recomputation from `results` (SQLite and PostgreSQL upserts), and the pages answer from it."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from app.db import engine_for
from app.models.results import Result, ResultPoint
from app.store.resultpoints import rebuild
from app.web.dashboard.data import results as data


def _result(n: int, **kw: Any) -> Result:
    base: dict[str, Any] = {
        "result_name": f"r{n}", "config_key": "k1", "image": "img:1", "fingerprint": "f",
        "model": "amd/MiniMax-M3-MXFP4", "runner": "mi355x", "isl": 8192, "osl": 1024, "conc": 4,
        "tp": 4, "pp": 1, "ep": 1, "mean_tpot_ms": 10.0, "schema": "raw",
    }  # fmt: skip
    return Result(**{**base, **kw})


def _index(session: Session) -> list[tuple[Any, ...]]:
    session.expire_all()
    rows = session.scalars(select(ResultPoint)).all()
    return sorted(
        (r.config_key, r.image, r.isl, r.osl, r.tp, r.conc, r.latest_id, r.first_id, r.runs, r.tpot_n,
         round(r.tpot_sum, 6))
        for r in rows
    )  # fmt: skip


def _fill(session: Session) -> None:
    rng = random.Random(29)
    for n in range(120):
        session.add(
            _result(
                n,
                config_key=rng.choice(["k1", "k2"]),
                image=rng.choice(["img:1", "img:2", "img:3"]),
                conc=rng.choice([4, 8, 16]),
                tp=rng.choice([4, 8]),
                isl=rng.choice([8192, None]),
                mean_tpot_ms=rng.choice([None, 5.0, 7.5, 12.25]),
            )
        )
        if n % 7 == 0:
            session.commit()  # some in one flush, some alone
    session.commit()


def _check_index_matches_a_rebuild(session: Session) -> None:
    _fill(session)
    kept = _index(session)
    assert kept and sum(r[8] for r in kept) == 120
    rebuild(session)
    session.commit()
    assert _index(session) == kept


def test_the_index_equals_a_recomputation_sqlite(db_session: Session) -> None:
    _check_index_matches_a_rebuild(db_session)


@pytest.mark.services
def test_the_index_equals_a_recomputation_postgres(pg_clean_url: str) -> None:
    with sessionmaker(bind=engine_for(pg_clean_url))() as session:
        _check_index_matches_a_rebuild(session)


def test_the_results_pages_read_the_index(db_session: Session) -> None:
    for n, (image, conc, tpot) in enumerate((("img:1", 4, 10.0), ("img:1", 4, 14.0), ("img:2", 8, 6.0))):
        db_session.add(_result(n, image=image, conc=conc, mean_tpot_ms=tpot))
    db_session.commit()
    keys = data.result_keys(db_session)
    assert [(k.config_key, k.results) for k in keys] == [("k1", 3)]
    page = data.results_for_key(db_session, "k1", image="img:1")
    assert [(p.image, p.conc, p.mean_tpot_ms) for p in page.images] == [("img:1", 4, 12.0), ("img:2", 8, 6.0)]
    # Rows written around the ORM are not in the index: the pages do not see them until a rebuild,
    # so it is the index they read (grouping `results` would count 4).
    db_session.execute(
        text(
            "INSERT INTO results (result_name, config_key, image, fingerprint, conc, tp, pp, ep, schema)"
            " VALUES ('raw', 'k1', 'img:1', 'f', 4, 4, 1, 1, 'raw')"
        )
    )
    db_session.commit()
    assert data.result_keys(db_session)[0].results == 3
    rebuild(db_session)
    db_session.commit()
    assert data.result_keys(db_session)[0].results == 4
