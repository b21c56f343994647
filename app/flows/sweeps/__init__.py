"""A sweep's life outside the scheduler: requesting and storing it, cancelling and retrying,
label mode, fork approval, finishing a job, and ringing the broker for follow-up work."""
