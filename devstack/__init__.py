"""The development stack around the product: `sweepbot up` (API, worker and beat, with a simulated
GitHub when no credentials are set), `sweepbot demo` and the seed story, and `sweepbot sim`.

The one place that wires the product (`app`) to the simulator (`sim`); neither imports the other
(pyproject `[tool.importlinter]`). Not shipped in the Docker image.
"""
