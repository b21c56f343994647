"""The reference that applies to a config key, with the sibling key's rows read from the database.

The rule is pure (``app.core.references.choose_reference``); this module only supplies the stored
results and eval scores of the sibling key it may fall back on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session

from app.core.references import Reference
from app.core.references import choose_reference as choose_from
from app.models.results import EvalResult, Result
from app.store.results import key_evals, key_results


class StoredSiblings:
    """``app.core.references.SiblingRows`` over the ``results`` and ``eval_results`` tables."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def results(
        self, config_key: str, *, isl: int | None, osl: int | None, tp: int | None
    ) -> Sequence[Result]:
        return key_results(self.session, config_key, isl=isl, osl=osl, tp=tp)

    def evals(self, config_key: str, *, tp: int | None) -> Sequence[EvalResult]:
        return key_evals(self.session, config_key, tp=tp)


def choose_reference(
    session: Session | None,
    *,
    config_key: str,
    model: str | None,
    hardware: str | None,
    tp: int | None,
    isl: int | None,
    osl: int | None,
    configured: Mapping[str, str] | None = None,
) -> Reference | None:
    """``app.core.references.choose_reference`` with the sibling's rows from ``session`` (none without)."""
    return choose_from(
        StoredSiblings(session) if session is not None else None,
        config_key=config_key,
        model=model,
        hardware=hardware,
        tp=tp,
        isl=isl,
        osl=osl,
        configured=configured,
    )
