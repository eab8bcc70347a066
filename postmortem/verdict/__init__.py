"""Stage 6: findings into a verdict (root vs cascade), its sentences, advice, failure signals and evidence gaps."""
