"""The model client: litellm behind one gate, errors, retries, the bundled offline model."""
