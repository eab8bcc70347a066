"""Stage 4: where every rank was and how it ended, odd lines, culprits, flight-recorder matching and waits."""
