"""Values: JSON snapshots, content blocks, signals, schemas, definitions, the batch's values."""
