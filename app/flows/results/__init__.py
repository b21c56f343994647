"""Results: collecting a job's artifacts, the sticky report, reuse at merge and publication
(the recovery PR)."""
