"""One call: the pipeline's stages, hooks, results, definitions, the registry and approval."""
