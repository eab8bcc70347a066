"""Stage 3: parser rows into validated pandas tables (schema, column folding, joins across tables)."""
