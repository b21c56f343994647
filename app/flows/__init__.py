"""One module per capability: load facts, ask the core for a decision, apply it through adapters."""
