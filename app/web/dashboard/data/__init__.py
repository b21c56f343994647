"""Read side of the dashboard: each page is a handful of bounded, index-friendly queries.

Rules kept here: every list is paginated (``LIMIT per_page + 1`` tells whether a next page exists,
so big tables are never counted); children of a page's rows are loaded with one ``IN`` query per
kind (no N+1); nothing here calls GitHub or decides anything: the verdicts and explanations come
from the same core functions the sticky report and the PR comments use.

One module per page family: ``overview``, ``records`` (deliveries, audit), ``sweeps``,
``watches``, ``results``; ``common`` holds the paging and time helpers they share.
"""
